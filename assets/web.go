package assets

import (
	"embed"
	"io/fs"
)

//go:embed web
var webFiles embed.FS

// Web returns the dashboard's static files, served under /ui/static/ (DESIGN.md §9):
// htmx.min.js (htmx 2.0.11, vendored unmodified; its 0BSD license in htmx-LICENSE.txt),
// app.css and favicon.svg. Nothing else is fetched, so the dashboard works offline.
func Web() fs.FS {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // "web" is a literal, valid path: fs.Sub cannot fail on it
	}
	return sub
}
