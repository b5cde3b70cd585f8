//go:build e2e

package e2e_test

// The health record with the state dir on a full tmpfs (Linux: mount needs root there).

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
	"github.com/smarter-compact/smarter-compact/store"
)

// TestE2EHealthDiskFull: the state dir on a 2 MiB tmpfs that fills up while serve runs.
// Every request still reaches the model; /api/status's health says the store cannot write
// the session, with the reason and what to do; the log says what to do once.
func TestE2EHealthDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a tmpfs needs root (CI runs the e2e tests as root)")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=2m,mode=0700"); err != nil {
		t.Skipf("skipping: mount -t tmpfs -o size=2m: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(state, syscall.MNT_DETACH) })
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: dashReply, APIKey: "dummy-key"})
	srv := launchServe(t, bin, dir, []string{"serve", "--no-tray"}, []string{"SMARTER_COMPACT_CONFIG=" + config},
		[]string{"SMARTER_COMPACT_UPSTREAM_ANTHROPIC=" + fake.URL})
	logServeOnFailure(t, srv)
	tokenFile := filepath.Join(dir, "home", ".config", "smarter-compact", "api-token")
	const sid = "e2e-health-full"
	if code := postClaude(t, srv.url(), sid, healthBody(sid, "with room")); code != http.StatusOK {
		t.Fatalf("with room: %d", code)
	}
	_, before := apiHealth(t, srv.url(), tokenFile)
	t.Logf("/api/status health with room: %s", healthOnly(before))

	// fill the tmpfs
	f, err := os.Create(filepath.Join(state, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 16<<10); ; {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	const n = 10
	for i := range n {
		prompt := fmt.Sprintf("request %d on a full disk: %s", i, strings.Repeat("lorem ipsum dolor sit amet ", 400))
		if code := postClaude(t, srv.url(), sid, healthBody(sid, prompt)); code != http.StatusOK {
			t.Fatalf("request %d on a full disk: %d, want the model's 200 (the proxy fails open)", i, code)
		}
	}
	var snap store.HealthSnapshot
	var after []byte
	if !waitFor(5*time.Second, func() bool {
		snap, after = apiHealth(t, srv.url(), tokenFile)
		return snap.Kind(store.HealthStoreWrite).Active > 0
	}) {
		t.Fatalf("/api/status health after %d requests on a full disk: %s", n, healthOnly(after))
	}
	t.Logf("/api/status health on the full disk: %s", healthOnly(after))
	sw := snap.Kind(store.HealthStoreWrite)
	e := sw.Entries[0]
	if e.Key != sid || e.Class != "disk_full" || !strings.Contains(e.Text, "full") || !strings.Contains(e.Hint, "free space") {
		t.Errorf("store_write entry: %+v", e)
	}
	if got := len(fake.Requests()); got != n+1 {
		t.Errorf("the model got %d requests, want %d", got, n+1)
	}
	if c := strings.Count(srv.log.String(), "do=\"The disk holding"); c != 1 {
		t.Errorf("the log says what to do about the full disk %d times, want once:\n%s", c, srv.log)
	}
}
