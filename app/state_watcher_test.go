package app

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/smarter-compact/smarter-compact/proxy/config"
)

// TestConfigWatcherRefusesLargeFile: the watcher reads config.toml every second; a file
// swapped for something no config is shows as the config error and the settings stay.
func TestConfigWatcherRefusesLargeFile(t *testing.T) {
	t.Parallel()
	st, path, _ := testState(t, "[context_proxy.agents]\ncodex = false\n", nil)
	st.settle = 0
	big := bytes.Repeat([]byte("# padding\n"), config.MaxBytes/10+1)
	if err := os.WriteFile(path, append([]byte("[context_proxy.agents]\ncodex = true\n"), big...), 0o600); err != nil {
		t.Fatal(err)
	}
	st.poll()
	if msg := st.State().ConfigError; !strings.Contains(msg, "larger than 1024 KiB") {
		t.Fatalf("ConfigError = %q, want the size error", msg)
	}
	if st.Enabled(config.AgentCodex) {
		t.Fatal("the oversized file was applied")
	}
}
