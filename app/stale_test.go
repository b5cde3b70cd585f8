package app

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/installer"
	"github.com/smarter-compact/smarter-compact/proxy"
)

// healthService answers GET /healthz on a loopback port as serve does, reporting build ("" no
// header, as a release before the header).
func healthService(t *testing.T, build string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if build != "" {
			w.Header().Set(installer.HealthBuildHeader, build)
		}
		w.Write([]byte("ok"))
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().(*net.TCPAddr).Port
}

// status says when the running service is older than the installed binary (the seed's
// proxy_stale) and gives the command that restarts it (issue 17).
func TestStatusProxyStale(t *testing.T) {
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "smarter-compact")
	must(t, os.WriteFile(exe, []byte("the installed build"), 0o700))
	installed := proxy.FileVersion(exe)
	for _, tc := range []struct {
		name, build string
		stale       bool
		text        string
	}{
		{"same build", installed, false, "Proxy version check: the service runs the installed binary (" + installed + ")"},
		{"older build", "proxy:000000000000", true, "stale: it runs proxy:000000000000, not the installed binary (" + installed + "); restart it: " + restartCommand},
		{"release before the header", "", true, "stale: it runs an older release, not the installed binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			port := healthService(t, tc.build)
			e := env{"SMARTER_COMPACT_STATE_DIR": t.TempDir(), "CONTEXT_PROXY_PORT": strconv.Itoa(port)}
			sys, stdout, stderr := testSystem(t, e)
			sys.exe = exe
			if err := run(t.Context(), []string{"status", "--json"}, sys); err != nil {
				t.Fatalf("status: %v (%s)", err, stderr)
			}
			var rep struct {
				Checkout *string `json:"checkout_proxy_version"`
				Stale    *bool   `json:"proxy_stale"`
				Service  struct {
					Build, Restart string
				} `json:"service"`
			}
			must(t, json.Unmarshal([]byte(stdout.String()), &rep))
			if rep.Stale == nil || *rep.Stale != tc.stale || rep.Checkout == nil || *rep.Checkout != installed {
				t.Fatalf("proxy_stale %v, checkout_proxy_version %v; want %v, %s", rep.Stale, rep.Checkout, tc.stale, installed)
			}
			if (rep.Service.Restart == restartCommand) != tc.stale {
				t.Errorf("restart %q", rep.Service.Restart)
			}
			sys, stdout, _ = testSystem(t, e)
			sys.exe = exe
			must(t, run(t.Context(), []string{"status", "--verbose"}, sys))
			summary, _, _ := strings.Cut(stdout.String(), "\n\n")
			if got := strings.Contains(summary, "Upgrade: the service runs an older build than the installed binary; restart it: "+restartCommand); got != tc.stale {
				t.Errorf("the summary says stale: %v, want %v:\n%s", got, tc.stale, summary)
			}
			if !strings.Contains(stdout.String(), "Memory: recall on trim: off (no [memory] table)") {
				t.Errorf("status does not say memory is off:\n%s", stdout)
			}
			if !strings.Contains(stdout.String(), tc.text) {
				t.Errorf("status lacks %q:\n%s", tc.text, stdout)
			}
		})
	}
}

// The service's own check: the file on disk replaced after start is stale, rehashed only
// when its size or mtime changed.
func TestBuildCheck(t *testing.T) {
	t.Parallel()
	exe := filepath.Join(t.TempDir(), "smarter-compact")
	must(t, os.WriteFile(exe, []byte("v1"), 0o700))
	b := &buildCheck{path: exe, running: proxy.FileVersion(exe)}
	if inst, stale := b.check(); stale || inst != b.running {
		t.Fatalf("unchanged file: %s stale %v", inst, stale)
	}
	must(t, os.WriteFile(exe, []byte("v2, an upgrade in place"), 0o700))
	future := time.Now().Add(time.Hour)
	must(t, os.Chtimes(exe, future, future))
	if inst, stale := b.check(); !stale || inst != proxy.FileVersion(exe) {
		t.Fatalf("replaced file: %s stale %v", inst, stale)
	}
	var none *buildCheck
	if _, stale := none.check(); stale {
		t.Fatal("no check is never stale")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
