module github.com/smarter-compact/smarter-compact

go 1.26.8

require (
	github.com/andybalholm/brotli v1.3.0
	github.com/go-chi/chi/v5 v5.5.0
	github.com/klauspost/compress v1.20.4
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/pelletier/go-toml/v2 v2.4.3
)
