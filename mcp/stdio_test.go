package mcp

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// TestStdioInProcess drives ServeStdio over pipes with mcp-go's client, then closes the
// client's side: ServeStdio must return nil at EOF. (mcp-go keeps one stdio session per
// process, so this is the only in-process stdio test.)
func TestStdioInProcess(t *testing.T) {
	r := newRig(t)
	id, err := r.writer.WriteBlob("stdio blob")
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := r.srv.ServeStdio(t.Context(), serverIn, serverOut)
		_ = serverOut.Close()
		done <- err
	}()
	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	initialize(t, c)
	checkToolList(t, c)
	var page map[string]any
	callJSON(t, c, ToolGet, map[string]any{"id": id}, &page)
	if page["text"] != "stdio blob" {
		t.Errorf("page %v", page)
	}
	if msg := callError(t, c, ToolGet, map[string]any{"id": "ffffffffffffffff"}); !strings.Contains(msg, "no blob with id") {
		t.Errorf("error %q", msg)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeStdio at EOF: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after its input closed")
	}
}
