//go:build e2e

package e2e_test

// The tray end to end (issue 6, Show: "a tray test under dbus-run-session"): the real
// binary's `serve` on a private D-Bus session bus, driven from outside as a tray host
// would, over com.canonical.dbusmenu; the dashboard's /api, the proxy (through the strict
// fake upstream) and config.toml must follow each click, and the menu must follow each
// change made elsewhere. Also: serve without a bus runs headless and says so once, and
// SIGTERM ends a serve with a running tray cleanly.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/pelletier/go-toml/v2"

	"github.com/smarter-compact/smarter-compact/assets"
	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
	"github.com/smarter-compact/smarter-compact/web"
)

// Names of the StatusNotifierItem spec and the dbusmenu protocol, as fyne.io/systray
// exports them.
const (
	sniInterface   = "org.kde.StatusNotifierItem"
	sniPath        = "/StatusNotifierItem"
	sniMenuPath    = "/StatusNotifierItem/menu"
	sniWatcherName = "org.kde.StatusNotifierWatcher"
	sniWatcherPath = "/StatusNotifierWatcher"
	dbusmenu       = "com.canonical.dbusmenu"
)

// Labels of the tray's items (app/tray.go).
const (
	trayClaude = "Trim Claude Code"
	trayCodex  = "Trim Codex"
	trayOpen   = "Trim OpenCode"
	trayPause  = "Pause all"
	trayLogin  = "Start at login"
	trayQuit   = "Quit"
	// The confirmation Quit shows while an agent is wired.
	trayQuitPause = "Pause all instead"
	trayQuitSure  = "Quit anyway"
	trayDash      = "Open dashboard"
)

// trayConfig is the config.toml of the tray tests: a low trim threshold so that
// trayProbe is trimmed, and a comment the tray's edits must keep.
const trayConfig = `# tray e2e: this comment must survive the switches' edits
[context_proxy]
trim_at_tokens = 2000
`

var trayStatusRE = regexp.MustCompile(`^Today: (\d+) requests?, (\d+) trims?(, -?\$[0-9.]+ saved \(-?[0-9.]+ %\))?$`)

func TestE2ETray(t *testing.T) {
	t.Run("icons", testTrayIcons)
	bin := buildBinary(t)
	t.Run("headless", func(t *testing.T) { testTrayHeadless(t, bin) })
	daemon := findDBusDaemon(t)
	t.Run("menu", func(t *testing.T) { testTrayMenu(t, daemon, bin) })
	t.Run("no tray host, Quit", func(t *testing.T) { testTrayQuit(t, daemon, bin) })
	t.Run("Quit while an agent is wired", func(t *testing.T) { testTrayQuitWired(t, daemon, bin) })
}

// testTrayIcons checks the icons' encodings: the PNG (Linux) has no partly transparent
// pixel, which fyne.io/systray would garble (assets.TrayIcon); the ICO (Windows) is one
// well-formed 32-bit DIB entry whose AND mask matches its alpha, a disc of the PNG's colour.
func testTrayIcons(t *testing.T) {
	for _, s := range []assets.TrayState{assets.TrayActive, assets.TrayPaused, assets.TrayError} {
		ic := assets.Tray(s)
		img, err := png.Decode(bytes.NewReader(ic.PNG))
		if err != nil {
			t.Fatalf("icon %d: PNG: %v", s, err)
		}
		if b := img.Bounds(); b.Dx() != assets.TrayPNGSize || b.Dy() != assets.TrayPNGSize {
			t.Errorf("icon %d: PNG is %v, want %d square", s, b, assets.TrayPNGSize)
		}
		for y := range assets.TrayPNGSize {
			for x := range assets.TrayPNGSize {
				if _, _, _, a := img.At(x, y).RGBA(); a != 0 && a != 0xffff {
					t.Fatalf("icon %d: PNG pixel (%d,%d) has alpha %#x: only 0 or opaque survive fyne.io/systray", s, x, y, a)
				}
			}
		}
		ico, err := decodeICO(ic.ICO)
		if err != nil {
			t.Fatalf("icon %d: ICO: %v", s, err)
		}
		if b := ico.Bounds(); b.Dx() != assets.TrayICOSize || b.Dy() != assets.TrayICOSize {
			t.Errorf("icon %d: ICO is %v, want %d square", s, b, assets.TrayICOSize)
		}
		n := assets.TrayICOSize
		if ico.NRGBAAt(0, 0).A != 0 || ico.NRGBAAt(n-1, n-1).A != 0 {
			t.Errorf("icon %d: ICO corners are not transparent", s)
		}
		// The disc's colour at a point of the rim no sign reaches, in both encodings.
		pr, pg, pb, _ := img.At(assets.TrayPNGSize/2, 4*assets.TrayPNGSize/32).RGBA()
		ic2 := ico.NRGBAAt(n/2, 4)
		if ic2.A != 0xff || ic2.R != uint8(pr>>8) || ic2.G != uint8(pg>>8) || ic2.B != uint8(pb>>8) {
			t.Errorf("icon %d: ICO disc colour %v, PNG's %v", s, ic2, [3]uint32{pr >> 8, pg >> 8, pb >> 8})
		}
	}
}

// decodeICO reads an .ico file of one 32-bit BI_RGB DIB entry (what assets.Tray writes),
// checking every size and offset and that the AND mask is set exactly where alpha is 0.
func decodeICO(b []byte) (*image.NRGBA, error) {
	le := binary.LittleEndian
	if len(b) < 6+16+40 {
		return nil, fmt.Errorf("%d bytes: too short", len(b))
	}
	if le.Uint16(b[0:]) != 0 || le.Uint16(b[2:]) != 1 || le.Uint16(b[4:]) != 1 {
		return nil, fmt.Errorf("ICONDIR %x: want reserved 0, type 1, one image", b[:6])
	}
	e := b[6:22]
	w, h := int(e[0]), int(e[1])
	if w == 0 || h == 0 || le.Uint16(e[4:]) != 1 || le.Uint16(e[6:]) != 32 {
		return nil, fmt.Errorf("ICONDIRENTRY %x: want a size, 1 plane, 32 bpp", e)
	}
	size, off := int(le.Uint32(e[8:])), int(le.Uint32(e[12:]))
	if off != 22 || off+size != len(b) {
		return nil, fmt.Errorf("image at %d, %d bytes, in a file of %d", off, size, len(b))
	}
	d := b[off:]
	if le.Uint32(d[0:]) != 40 || int(int32(le.Uint32(d[4:]))) != w || int(int32(le.Uint32(d[8:]))) != 2*h ||
		le.Uint16(d[12:]) != 1 || le.Uint16(d[14:]) != 32 || le.Uint32(d[16:]) != 0 {
		return nil, fmt.Errorf("BITMAPINFOHEADER %x: want 40 bytes, %d×%d (twice the height), 1 plane, 32 bpp, BI_RGB", d[:20], w, 2*h)
	}
	stride := (w + 31) / 32 * 4
	if size != 40+w*h*4+stride*h {
		return nil, fmt.Errorf("%d bytes of image, want %d", size, 40+w*h*4+stride*h)
	}
	px, mask := d[40:40+w*h*4], d[40+w*h*4:]
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for row := range h {
		y := h - 1 - row // bottom up
		for x := range w {
			p := px[(row*w+x)*4:]
			c := color.NRGBA{R: p[2], G: p[1], B: p[0], A: p[3]}
			img.SetNRGBA(x, y, c)
			if masked := mask[row*stride+x/8]&(0x80>>(x%8)) != 0; masked != (c.A == 0) {
				return nil, fmt.Errorf("pixel (%d,%d): alpha %d but AND mask %v", x, y, c.A, masked)
			}
		}
	}
	return img, nil
}

// testTrayMenu: the menu over D-Bus, its clicks, and everything that must follow them.
func testTrayMenu(t *testing.T, daemon, bin string) {
	bus := startBus(t, daemon)
	w := startWatcher(t, bus)
	fake := fakeupstream.Start(t, fakeupstream.Options{APIKey: "dummy-key",
		Reply: func(*fakeupstream.Request) fakeupstream.Reply {
			return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("ok")}}
		}})
	// "Open dashboard" runs xdg-open (github.com/cli/browser): this one records its argument.
	fakeBin, opened := t.TempDir(), filepath.Join(t.TempDir(), "opened")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + opened + "'\n"
	if err := os.WriteFile(filepath.Join(fakeBin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := startTrayServe(t, bin, trayConfig, "DBUS_SESSION_BUS_ADDRESS="+bus.addr, "SMARTER_COMPACT_UPSTREAM_ANTHROPIC="+fake.URL,
		"PATH="+fakeBin+string(os.PathListSeparator)+os.Getenv("PATH"))
	tc := connectTray(t, bus, srv.cmd.Process.Pid)
	token := srv.token(t)

	// The item registered with the tray host, under the name it exports.
	owner := tc.owner(t)
	if !waitFor(5*time.Second, func() bool { return w.registered(owner) }) {
		t.Errorf("the tray did not register with the StatusNotifierWatcher (registrations: %q; item owner %s)", w.list(), owner)
	}
	if strings.Contains(srv.log.String(), "no tray host is running yet") {
		t.Errorf("serve says no tray host runs, with the watcher on the bus:\n%s", srv.log)
	}
	if st := srv.apiStatus(t, token); st.Tray != "running" {
		t.Errorf("/api/status tray = %q, want running", st.Tray)
	}

	// The menu: the first GetLayout is shallow on purpose (research/go-spikes.md §3), the
	// second complete. Items are found by label.
	tc.layout(t)
	items := tc.layout(t)
	for _, l := range []string{trayClaude, trayCodex, trayOpen, trayPause, trayDash, trayLogin, trayQuit} {
		if _, ok := items[l]; !ok {
			t.Fatalf("no item %q in the menu: %v", l, items)
		}
	}
	status := items.status(t)
	if !trayStatusRE.MatchString(status.label) || status.enabled {
		t.Errorf("status line %q (enabled %v): want a disabled %q", status.label, status.enabled, trayStatusRE)
	}
	for _, l := range []string{trayClaude, trayCodex, trayOpen} {
		if it := items[l]; it.toggleType != "checkmark" || it.toggle != 1 || !it.enabled {
			t.Errorf("%q: %+v, want an enabled checkmark that is checked (every agent trims by default)", l, it)
		}
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil && items[trayLogin].enabled {
		t.Errorf("%q is enabled, but systemd does not run here: the login service cannot be installed", trayLogin)
	}
	tc.checkIcon(t, assets.TrayActive, time.Second)

	// With Claude Code on, the probe is trimmed: it reaches the model shorter than sent.
	sent := trayProbe("tray-e2e-on")
	got := srv.messages(t, fake, "tray-e2e-on", sent)
	if bytes.Equal(got, sent) || len(got) >= len(sent) {
		t.Fatalf("with trimming on, the probe reached the model unchanged or not shorter (%d bytes sent, %d received): it cannot show that off passes through", len(sent), len(got))
	}

	// Click "Trim Claude Code": the checkbox, /api, the proxy and config.toml follow.
	claude := items[trayClaude].id
	tc.click(t, claude)
	if took, ok := tc.waitToggle(claude, 0, 2*time.Second); !ok {
		t.Fatalf("after a click, %q is still checked after %s", trayClaude, took)
	}
	a := srv.apiAgents(t, token)["claude-code"]
	if a.Mode != web.ModeOff || a.Trimming {
		t.Errorf("/api/agents claude-code after the click: %+v, want mode off, not trimming", a)
	}
	if o := srv.apiAgents(t, token)["codex"]; !o.Trimming {
		t.Errorf("/api/agents codex after the Claude Code click: %+v, want it still trimming", o)
	}
	sent = trayProbe("tray-e2e-off")
	if got := srv.messages(t, fake, "tray-e2e-off", sent); !bytes.Equal(got, sent) {
		t.Errorf("with Claude Code off, the probe was changed on the way (%d bytes sent, %d received)", len(sent), len(got))
	}
	cfg := readTrayConfig(t, srv.config)
	if v, ok := cfg.agents["claude-code"]; !ok || v != false {
		t.Errorf("config.toml [context_proxy.agents] claude-code = %v (present %v), want false:\n%s", v, ok, cfg.text)
	}
	if !strings.Contains(cfg.text, "# tray e2e: this comment must survive") {
		t.Errorf("config.toml lost its comment:\n%s", cfg.text)
	}

	// A change through /api shows in the menu within a second.
	srv.apiSetAgent(t, token, "claude-code", web.ModeOn)
	if took, ok := tc.waitToggle(claude, 1, time.Second); !ok {
		t.Errorf("after POST /api/agents/claude-code on, %q is still unchecked after %s", trayClaude, took)
	} else {
		t.Logf("the menu followed /api in %s", took.Round(time.Millisecond))
	}

	// Pause all: the agents are unchecked and disabled, the icon turns to paused; and back.
	pause := items[trayPause].id
	tc.click(t, pause)
	if took, ok := tc.waitToggle(pause, 1, 2*time.Second); !ok {
		t.Fatalf("after a click, %q is still unchecked after %s", trayPause, took)
	}
	if !srv.apiStatus(t, token).Paused {
		t.Errorf("/api/status paused = false after the tray's pause")
	}
	if it := tc.item(t, claude); it.toggle != 0 || it.enabled {
		t.Errorf("%q while paused: %+v, want unchecked and disabled", trayClaude, it)
	}
	tc.checkIcon(t, assets.TrayPaused, 2*time.Second)
	tc.click(t, pause)
	if took, ok := tc.waitToggle(pause, 0, 2*time.Second); !ok {
		t.Fatalf("after a second click, %q is still checked after %s", trayPause, took)
	}
	if it := tc.item(t, claude); it.toggle != 1 || !it.enabled {
		t.Errorf("%q after pause ended: %+v, want checked and enabled", trayClaude, it)
	}
	tc.checkIcon(t, assets.TrayActive, time.Second)

	// "Open dashboard" opens the dashboard's URL in the browser.
	tc.click(t, items[trayDash].id)
	var url string
	if !waitFor(5*time.Second, func() bool {
		b, _ := os.ReadFile(opened)
		url = strings.TrimSpace(string(b))
		return url != ""
	}) || url != srv.url()+"/" {
		t.Errorf("%q opened %q, want %q", trayDash, url, srv.url()+"/")
	}

	// A hand edit of config.toml shows in the menu (the state polls the file every second).
	edited := strings.Replace(readTrayConfig(t, srv.config).text, "claude-code = true", "claude-code = true\nopencode = false", 1)
	if err := os.WriteFile(srv.config, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if took, ok := tc.waitToggle(items[trayOpen].id, 0, 3*time.Second); !ok {
		t.Errorf("after a hand edit (opencode = false), %q is still checked after %s:\n%s", trayOpen, took, edited)
	}

	// A hand edit that does not load shows the error icon; fixing it clears it.
	good := readTrayConfig(t, srv.config).text
	if err := os.WriteFile(srv.config, []byte(good+"trim_to_fraction = \"most\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tc.checkIcon(t, assets.TrayError, 3*time.Second)
	if err := os.WriteFile(srv.config, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	tc.checkIcon(t, assets.TrayActive, 3*time.Second)

	// The status line counts what the proxy did today; the tray reads the store every 5 s.
	if !waitFor(15*time.Second, func() bool {
		m := trayStatusRE.FindStringSubmatch(tc.item(t, status.id).label)
		return m != nil && m[1] != "0" && m[2] != "0"
	}) {
		t.Errorf("status line %q: want the trimmed request counted", tc.item(t, status.id).label)
	}

	// A fail-open in the last 10 minutes shows the error icon: one written to the store as
	// the proxy writes it, from this process (the store takes a second writer process).
	root, err := store.Open(filepath.Join(srv.stateDir, "context"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := root.Session("tray-e2e-fail-open")
	if err == nil {
		err = db.AddEvent(store.Event{Kind: "fail_open", Version: "proxy:e2e", Location: "e2e_tray_test.go:1", Error: "*errors.errorString"})
	}
	root.Close()
	if err != nil {
		t.Fatalf("write a fail_open event: %v", err)
	}
	tc.checkIcon(t, assets.TrayError, 10*time.Second)

	took, err := srv.sigterm()
	if err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, srv.log)
	}
	if took > 5*time.Second {
		t.Errorf("serve with the tray took %s to exit after SIGTERM", took)
	}
	t.Logf("serve with the tray exited 0 %s after SIGTERM", took.Round(time.Millisecond))
	checkTrayLog(t, srv.log.String())
	checkCleanedUp(t, srv)
}

// testTrayQuit: a bus found through $XDG_RUNTIME_DIR/bus (no DBUS_SESSION_BUS_ADDRESS) and
// without a tray host; the item is still exported, serve says once that no host runs yet,
// and the Quit item ends serve with status 0.
func testTrayQuit(t *testing.T, daemon, bin string) {
	bus := startBus(t, daemon)
	srv := startTrayServe(t, bin, trayConfig, "XDG_RUNTIME_DIR="+bus.dir)
	tc := connectTray(t, bus, srv.cmd.Process.Pid)
	tc.layout(t)
	quit, ok := tc.layout(t)[trayQuit]
	if !ok {
		t.Fatalf("no %q item in the menu", trayQuit)
	}
	if n := strings.Count(srv.log.String(), "no tray host is running yet"); n != 1 {
		t.Errorf("serve said %d times that no tray host runs, want once:\n%s", n, srv.log)
	}
	testSecondLaunch(t, bin, srv)
	start := time.Now()
	tc.click(t, quit.id)
	waitQuit(t, srv.serveProc, trayQuit)
	t.Logf("exited 0 %s after %q", time.Since(start).Round(time.Millisecond), trayQuit)
	checkTrayLog(t, srv.log.String())
	checkCleanedUp(t, srv)
}

// testTrayQuitWired: with Claude Code wired to the service, Quit does not quit: it shows the
// warning naming the agent, "Pause all instead" (which pauses and keeps serving) and "Quit
// anyway" (which ends serve with status 0).
func testTrayQuitWired(t *testing.T, daemon, bin string) {
	bus := startBus(t, daemon)
	srv := startTrayServe(t, bin, trayConfig, "XDG_RUNTIME_DIR="+bus.dir)
	home := filepath.Join(filepath.Dir(srv.stateDir), "home")
	makeDirs(t, filepath.Join(home, ".claude"))
	wire := exec.Command(bin, "install", "--agents", "claude-code")
	wire.Env = srv.cmd.Env
	if out, err := wire.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	// The wire page reads the agents' files again at once (the service does every 10 s).
	if resp, err := http.Get(srv.url() + "/ui/wire"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	tc := connectTray(t, bus, srv.cmd.Process.Pid)
	tc.layout(t)
	items := tc.layout(t)
	for _, l := range []string{trayQuitPause, trayQuitSure} {
		if it, ok := items[l]; !ok || it.visible {
			t.Fatalf("%q: %+v (found %v): want it in the menu, hidden until Quit is clicked", l, it, ok)
		}
	}
	// shown waits until the confirmation is visible and returns the menu.
	shown := func() menuItems {
		t.Helper()
		var m menuItems
		if !waitFor(5*time.Second, func() bool {
			m = tc.layout(t)
			return m[trayQuitSure].visible && m[trayQuitPause].visible
		}) {
			t.Fatalf("after %q the confirmation is not shown: %+v", trayQuit, m)
		}
		return m
	}
	tc.click(t, items[trayQuit].id)
	m := shown()
	warn := ""
	for label, it := range m {
		if strings.Contains(label, "cannot reach their API") && it.visible && !it.enabled {
			warn = label
		}
	}
	if want := "Wired agents (claude-code) cannot reach their API until the service runs again"; warn != want {
		t.Errorf("the warning is %q, want a disabled line %q", warn, want)
	}
	if err := srv.waitHealthy(time.Second); err != nil {
		t.Fatalf("serve stopped on the first click on %q with an agent wired: %v", trayQuit, err)
	}

	tc.click(t, m[trayQuitPause].id)
	if !waitFor(5*time.Second, func() bool {
		b, _ := os.ReadFile(srv.config)
		return strings.Contains(string(b), "paused = true")
	}) {
		b, _ := os.ReadFile(srv.config)
		t.Fatalf("%q did not save the pause:\n%s", trayQuitPause, b)
	}
	if !waitFor(5*time.Second, func() bool { return !tc.layout(t)[trayQuitSure].visible }) {
		t.Errorf("the confirmation is still shown after %q", trayQuitPause)
	}
	if err := srv.waitHealthy(time.Second); err != nil {
		t.Fatalf("serve stopped after %q: %v", trayQuitPause, err)
	}

	tc.click(t, tc.layout(t)[trayQuit].id)
	tc.click(t, shown()[trayQuitSure].id)
	waitQuit(t, srv.serveProc, trayQuitSure)
}

// waitQuit fails the test unless serve exits with status 0 within 15 s of the click on the
// menu item named item.
func waitQuit(t *testing.T, srv *serveProc, item string) {
	t.Helper()
	select {
	case <-srv.done:
		if err := srv.exitErr(); err != nil {
			t.Fatalf("after %q: %v\n%s", item, err, srv.log)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still runs 15 s after %q:\n%s", item, srv.log)
	}
}

// testSecondLaunch: the binary's serve, started again with the first one's environment
// (the .desktop entry while the login copy runs), hands over: it exits 0 and says so in
// one line. Its PATH has no browser, so nothing opens; that line then names the
// dashboard's address. The first keeps serving.
func testSecondLaunch(t *testing.T, bin string, first *trayServe) {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(append([]string{}, first.cmd.Env...), "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("second serve: %v, want exit 0\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "is in use by smarter-compact, already running here") || !strings.Contains(lines[0], "dashboard="+first.url()+"/") {
		t.Errorf("second serve said %q, want one line of the hand-off naming %s/", out, first.url())
	}
	if err := first.waitHealthy(time.Second); err != nil {
		t.Errorf("the first serve after the second launch: %v", err)
	}
	if _, err := os.Stat(filepath.Join(first.configDir, "smarter-compact", "service-addr")); err != nil {
		t.Errorf("the first serve's address file: %v", err)
	}
	t.Logf("second launch: %s", lines[0])
}

// checkCleanedUp: serve's deferred cleanup ran after the tray let go of the main thread:
// the shutdown was logged and the address file, which one of serve's defers removes, is
// gone.
func checkCleanedUp(t *testing.T, srv *trayServe) {
	t.Helper()
	if !strings.Contains(srv.log.String(), "shutting down") {
		t.Errorf("serve did not log its shutdown:\n%s", srv.log)
	}
	if _, err := os.Stat(filepath.Join(srv.configDir, "smarter-compact", "service-addr")); !os.IsNotExist(err) {
		t.Errorf("the address file outlived serve (its deferred cleanup did not run): %v", err)
	}
}

// testTrayHeadless: without a reachable session bus serve keeps serving, says so once, never
// starts the tray library, and exits 0 on SIGTERM.
func testTrayHeadless(t *testing.T, bin string) {
	for _, tc := range []struct {
		name string
		env  func(dir string) []string
		why  string
	}{
		{"address of a missing socket", func(dir string) []string {
			return []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(dir, "no-such-bus")}
		}, "tray: no D-Bus session bus (unix:path="},
		{"no address and no runtime dir bus", func(string) []string { return nil },
			"tray: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset and there is no $XDG_RUNTIME_DIR/bus)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startTrayServe(t, bin, trayConfig, tc.env(t.TempDir())...)
			token := srv.token(t)
			// serve answers before the tray has looked for its host (in the background, up
			// to 5 s): "starting" until then.
			st := srv.apiStatus(t, token)
			for deadline := time.Now().Add(7 * time.Second); st.Tray == "starting" && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
				st = srv.apiStatus(t, token)
			}
			if !strings.HasPrefix(st.Tray, "headless: no D-Bus session bus (") {
				t.Errorf("/api/status tray = %q, want headless with the reason", st.Tray)
			}
			// Still serving, and still saying it only once a while later.
			time.Sleep(1500 * time.Millisecond)
			if err := srv.waitHealthy(time.Second); err != nil {
				t.Fatal(err)
			}
			logs := srv.log.String()
			if n := strings.Count(logs, "running headless"); n != 1 {
				t.Errorf("serve said %d times that it runs headless, want once:\n%s", n, logs)
			}
			if !strings.Contains(logs, tc.why) {
				t.Errorf("the headless line does not give the reason %q:\n%s", tc.why, logs)
			}
			if strings.Contains(logs, "systray") {
				t.Errorf("the tray library ran without a bus:\n%s", logs)
			}
			if _, err := srv.sigterm(); err != nil {
				t.Fatalf("SIGTERM: %v\n%s", err, logs)
			}
			checkTrayLog(t, srv.log.String())
		})
	}
}

// checkTrayLog fails on a panic or an error line in serve's log.
func checkTrayLog(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "panic") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "goroutine ") {
			t.Errorf("serve logged: %s", line)
		}
	}
}

// findDBusDaemon returns dbus-daemon's path; without it the test fails under
// SMARTER_COMPACT_E2E_REQUIRE=1 and skips otherwise.
func findDBusDaemon(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("dbus-daemon")
	if err == nil {
		return p
	}
	why := "dbus-daemon is not on PATH: install Debian's dbus-daemon package (bash .ci/run does)"
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s=1 but %s", envRequire, why)
	}
	t.Skipf("skipping: %s; set %s=1 to make this a failure", why, envRequire)
	return ""
}

// testBus is a private session bus and the test's own connection to it.
type testBus struct {
	addr string
	dir  string // holds the socket, named bus: an XDG_RUNTIME_DIR for the bus
	conn *dbus.Conn
}

// startBus runs `dbus-daemon --session` on a socket in a temporary folder until the test
// ends, and connects to it.
func startBus(t *testing.T, daemon string) *testBus {
	t.Helper()
	dir, err := os.MkdirTemp("", "sc-bus-") // short: a socket path is limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cmd := exec.Command(daemon, "--session", "--nofork", "--nopidfile", "--address=unix:path="+filepath.Join(dir, "bus"), "--print-address=1")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(io.Discard, out)
	}()
	var addr string
	select {
	case addr = <-lines:
	case <-time.After(10 * time.Second):
	}
	if addr == "" {
		t.Fatalf("dbus-daemon printed no address:\n%s", stderr.String())
	}
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatalf("connect to the test bus %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testBus{addr: addr, dir: dir, conn: conn}
}

// watcher is a fake tray host: it owns org.kde.StatusNotifierWatcher and records the items
// that register (the spec's RegisterStatusNotifierItem; the host would then show them).
type watcher struct {
	mu    sync.Mutex
	items []string // "<sender> <service>"
}

// RegisterStatusNotifierItem is the D-Bus method; service is a bus name or, as
// fyne.io/systray sends, the item's object path on the sender.
func (w *watcher) RegisterStatusNotifierItem(sender dbus.Sender, service string) *dbus.Error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.items = append(w.items, string(sender)+" "+service)
	return nil
}

func (w *watcher) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.items...)
}

func (w *watcher) registered(owner string) bool {
	for _, it := range w.list() {
		if it == owner+" "+sniPath {
			return true
		}
	}
	return false
}

// startWatcher exports a watcher on its own connection to b.
func startWatcher(t *testing.T, b *testBus) *watcher {
	t.Helper()
	conn, err := dbus.Connect(b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	w := &watcher{}
	if err := conn.Export(w, sniWatcherPath, sniWatcherName); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(sniWatcherName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: reply %v, %v", sniWatcherName, reply, err)
	}
	return w
}

// trayServe is `smarter-compact serve` with its tray, as a subprocess.
type trayServe struct {
	*serveProc
	config    string // config.toml
	configDir string // XDG_CONFIG_HOME: the API token's folder is under it
}

// startTrayServe runs serve (with the tray) on a free port, with config.toml holding
// config, its own home, config and runtime folders (no bus in the runtime folder), and env
// added. It returns once /healthz answers; the process is stopped when the test ends.
func startTrayServe(t *testing.T, bin, config string, env ...string) *trayServe {
	t.Helper()
	dir := t.TempDir()
	s := &trayServe{config: filepath.Join(dir, "config.toml"), configDir: filepath.Join(dir, "xdg-config")}
	if err := os.WriteFile(s.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	runtimeDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.serveProc = launchServe(t, bin, dir, []string{"serve"}, []string{
		"XDG_CONFIG_HOME=" + s.configDir,
		"XDG_RUNTIME_DIR=" + runtimeDir,
		"SMARTER_COMPACT_CONFIG=" + s.config,
	}, env)
	return s
}

// token reads the API token serve created at start.
func (s *trayServe) token(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.configDir, "smarter-compact", "api-token"))
	if err != nil {
		t.Fatalf("the API token serve creates: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// api does one /api request with the bearer token and decodes the JSON answer into out.
func (s *trayServe) api(t *testing.T, method, path, token string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

func (s *trayServe) apiStatus(t *testing.T, token string) web.State {
	t.Helper()
	var st web.State
	s.api(t, "GET", "/api/status", token, nil, &st)
	return st
}

func (s *trayServe) apiAgents(t *testing.T, token string) map[string]web.AgentSwitch {
	t.Helper()
	var got struct {
		Agents []web.AgentSwitch `json:"agents"`
	}
	s.api(t, "GET", "/api/agents", token, nil, &got)
	m := map[string]web.AgentSwitch{}
	for _, a := range got.Agents {
		m[a.Agent] = a
	}
	return m
}

func (s *trayServe) apiSetAgent(t *testing.T, token, agent string, mode web.Mode) {
	t.Helper()
	s.api(t, "POST", "/api/agents/"+agent, token, map[string]string{"mode": string(mode)}, nil)
}

// messages sends body as Claude Code would on its route and returns the body the fake
// upstream received for session sid.
func (s *trayServe) messages(t *testing.T, fake *fakeupstream.Server, sid string, body []byte) []byte {
	t.Helper()
	req, err := http.NewRequest("POST", s.url()+"/claude-code/v1/messages?beta=true", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "dummy-key")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Claude-Code-Session-Id", sid)
	req.Header.Set("User-Agent", "claude-cli/"+claudeVersion+" (external, sdk-cli)")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /claude-code/v1/messages (session %s): %s: %s", sid, resp.Status, answer)
	}
	for _, r := range fake.Requests() {
		if r.Header.Get("X-Claude-Code-Session-Id") == sid {
			return r.Body
		}
	}
	t.Fatalf("the fake upstream got no request of session %s", sid)
	return nil
}

// trayProbe is a Claude Code request of session sid well over trim_at_tokens = 2000: six
// turns, each a tool call with a long output, then a new prompt.
func trayProbe(sid string) []byte {
	var msgs []any
	for turn := 1; turn <= 6; turn++ {
		prompt := fmt.Sprintf("TRAY-TURN %d: read the next log with a tool and tell me about it.", turn)
		msgs = append(msgs, map[string]any{"role": "user", "content": prompt})
		id := fmt.Sprintf("toolu_01TRAYE2E%08d", turn)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{"command": fmt.Sprintf("cat tray-%d.log", turn)}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": id, "content": trayOutput(turn)},
			}},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": fmt.Sprintf("Log %d read: every job finished.", turn)},
			}})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "TRAY-TURN 7: which job was the slowest?"})
	b, err := json.Marshal(map[string]any{
		"model": "claude-opus-5-5", "max_tokens": 1024, "stream": false, "messages": msgs,
		"metadata": map[string]any{"user_id": fmt.Sprintf(`{"device_id":"d","account_uuid":"","session_id":%q}`, sid)},
		"system":   []any{map[string]any{"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."}},
		"tools": []any{map[string]any{"name": "Bash", "description": "Run a command", "input_schema": map[string]any{
			"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func trayOutput(turn int) string {
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "TRAY-OUT t=%d line=%d: 2026-11-29T10:%02d:00Z worker finished job %d in %d ms\n", turn, i, i, turn*100+i, (turn*7+i*13)%997)
	}
	return b.String()
}

// trayConfigFile is config.toml as text and its [context_proxy.agents] table.
type trayConfigFile struct {
	text   string
	agents map[string]any
}

func readTrayConfig(t *testing.T, path string) trayConfigFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	agents, err := configAgents(b)
	if err != nil {
		t.Fatalf("config.toml does not parse: %v\n%s", err, b)
	}
	return trayConfigFile{text: string(b), agents: agents}
}

// configAgents returns config.toml's [context_proxy.agents] switches (nil when the table is
// absent), or the parse error.
func configAgents(raw []byte) (map[string]any, error) {
	var doc struct {
		ContextProxy struct {
			Agents map[string]any `toml:"agents"`
		} `toml:"context_proxy"`
	}
	err := toml.Unmarshal(raw, &doc)
	return doc.ContextProxy.Agents, err
}

// trayClient drives the tray over D-Bus, as a tray host does.
type trayClient struct {
	bus  *testBus
	name string         // org.kde.StatusNotifierItem-<pid>-1
	menu dbus.BusObject // the dbusmenu object
	sni  dbus.BusObject // the StatusNotifierItem object
}

// connectTray waits (up to 10 s) for serve's StatusNotifierItem on the bus.
func connectTray(t *testing.T, b *testBus, pid int) *trayClient {
	t.Helper()
	name := fmt.Sprintf("org.kde.StatusNotifierItem-%d-1", pid)
	if !waitFor(10*time.Second, func() bool {
		var has bool
		err := b.conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, name).Store(&has)
		return err == nil && has
	}) {
		t.Fatalf("no %s on the bus after 10 s", name)
	}
	return &trayClient{bus: b, name: name, menu: b.conn.Object(name, sniMenuPath), sni: b.conn.Object(name, sniPath)}
}

func (c *trayClient) owner(t *testing.T) string {
	t.Helper()
	var owner string
	if err := c.bus.conn.BusObject().Call("org.freedesktop.DBus.GetNameOwner", 0, c.name).Store(&owner); err != nil {
		t.Fatal(err)
	}
	return owner
}

// menuItem is one dbusmenu item as GetLayout and GetGroupProperties give it.
type menuItem struct {
	id         int32
	label      string
	enabled    bool
	toggleType string
	toggle     int32
	visible    bool
}

func menuItemOf(id int32, props map[string]dbus.Variant) menuItem {
	it := menuItem{id: id, enabled: true, visible: true} // dbusmenu: both default to true
	if v, ok := props["label"].Value().(string); ok {
		it.label = v
	}
	if v, ok := props["enabled"].Value().(bool); ok {
		it.enabled = v
	}
	if v, ok := props["visible"].Value().(bool); ok {
		it.visible = v
	}
	if v, ok := props["toggle-type"].Value().(string); ok {
		it.toggleType = v
	}
	if v, ok := props["toggle-state"].Value().(int32); ok {
		it.toggle = v
	}
	return it
}

// menuItems maps label to item, and "" to the first item (the status line).
type menuItems map[string]menuItem

func (m menuItems) status(t *testing.T) menuItem {
	t.Helper()
	it, ok := m[""]
	if !ok {
		t.Fatal("empty menu")
	}
	return it
}

// layout calls GetLayout for the whole menu.
func (c *trayClient) layout(t *testing.T) menuItems {
	t.Helper()
	items := menuItems{}
	for i, it := range c.items(t) {
		if i == 0 {
			items[""] = it
		}
		if it.label != "" {
			items[it.label] = it
		}
	}
	return items
}

// items calls GetLayout for the whole menu and returns its items in menu order.
func (c *trayClient) items(t *testing.T) []menuItem {
	t.Helper()
	var rev uint32
	var root struct {
		ID       int32
		Props    map[string]dbus.Variant
		Children []dbus.Variant
	}
	call := c.menu.Call(dbusmenu+".GetLayout", 0, int32(0), int32(-1), []string{})
	if err := call.Store(&rev, &root); err != nil {
		t.Fatalf("GetLayout: %v", err)
	}
	var items []menuItem
	for i, ch := range root.Children {
		fields, ok := ch.Value().([]any)
		if !ok || len(fields) != 3 {
			t.Fatalf("GetLayout: child %d is %T %v", i, ch.Value(), ch.Value())
		}
		id, _ := fields[0].(int32)
		props, _ := fields[1].(map[string]dbus.Variant)
		items = append(items, menuItemOf(id, props))
	}
	return items
}

// item reads one item's properties.
func (c *trayClient) item(t *testing.T, id int32) menuItem {
	t.Helper()
	var got []struct {
		ID    int32
		Props map[string]dbus.Variant
	}
	if err := c.menu.Call(dbusmenu+".GetGroupProperties", 0, []int32{id}, []string{}).Store(&got); err != nil {
		t.Fatalf("GetGroupProperties %d: %v", id, err)
	}
	if len(got) != 1 {
		t.Fatalf("GetGroupProperties %d: %d items", id, len(got))
	}
	return menuItemOf(id, got[0].Props)
}

// click sends the "clicked" event a tray host sends when the user picks the item.
func (c *trayClient) click(t *testing.T, id int32) {
	t.Helper()
	if err := c.menu.Call(dbusmenu+".Event", 0, id, "clicked", dbus.MakeVariant(int32(0)), uint32(time.Now().Unix())).Err; err != nil {
		t.Fatalf("Event %d clicked: %v", id, err)
	}
}

// toggle reads the item's toggle-state with GetProperty.
func (c *trayClient) toggle(id int32) (int32, error) {
	var v dbus.Variant
	if err := c.menu.Call(dbusmenu+".GetProperty", 0, id, "toggle-state").Store(&v); err != nil {
		return -1, err
	}
	n, ok := v.Value().(int32)
	if !ok {
		return -1, fmt.Errorf("toggle-state is %s", v.Signature())
	}
	return n, nil
}

// waitToggle polls toggle-state until it is want or within has passed; it returns how long
// that took.
func (c *trayClient) waitToggle(id, want int32, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	ok := waitFor(within, func() bool {
		n, err := c.toggle(id)
		return err == nil && n == want
	})
	return time.Since(start), ok
}

// checkIcon waits up to within for the item's IconPixmap to be the PNG of state s: what a
// tray host draws.
func (c *trayClient) checkIcon(t *testing.T, s assets.TrayState, within time.Duration) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(assets.Tray(s).PNG))
	if err != nil {
		t.Fatal(err)
	}
	want := argb(img)
	var last string
	if waitFor(within, func() bool {
		v, err := c.sni.GetProperty(sniInterface + ".IconPixmap")
		if err != nil {
			last = err.Error()
			return false
		}
		var px []struct {
			W, H int32
			Pix  []byte
		}
		if err := dbus.Store([]any{v.Value()}, &px); err != nil || len(px) != 1 {
			last = fmt.Sprintf("IconPixmap %v: %v", v.Signature(), err)
			return false
		}
		last = fmt.Sprintf("%d×%d pixmap of %d bytes, %d bytes differ", px[0].W, px[0].H, len(px[0].Pix), diff(px[0].Pix, want))
		return int(px[0].W) == img.Bounds().Dx() && int(px[0].H) == img.Bounds().Dy() && bytes.Equal(px[0].Pix, want)
	}) {
		return
	}
	t.Errorf("the icon is not the %s icon after %s: %s", s, within, last)
}

// argb is img as a StatusNotifierItem pixmap: ARGB32, network byte order, rows top down.
func argb(img image.Image) []byte {
	b := img.Bounds()
	out := make([]byte, 0, b.Dx()*b.Dy()*4)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			out = append(out, byte(a>>8), byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return out
}

func diff(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
