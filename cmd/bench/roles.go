package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/smarter-compact/smarter-compact/app"
)

// This program runs itself as a child in two helper roles (-role), so each arm of the
// overhead comparison is its own process, as serve is.

// streamEvents is the number of SSE events in every answer of the lean upstream.
const streamEvents = 200

// leanUpstream is the fake model API of the overhead runs: it reads the whole request and
// answers with an Anthropic event stream of exactly streamEvents events, flushed one by one,
// with usage.input_tokens = body bytes / 3 (the strict fake's tokenizer). It parses nothing,
// so its cost is the same for every arm and small next to the proxy's; the strict fake
// (proxy/fakeupstream) validates the replay's requests instead.
func leanUpstream() http.Handler {
	deltas := streamEvents - 6 // message_start, block start, ping, block stop, message_delta, message_stop
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/messages") {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`, http.StatusNotFound)
			return
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in := (n + 2) / 3
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		send := func(event, data string) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
			rc.Flush()
		}
		send("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_lean","type":"message","role":"assistant","model":"claude-opus-5-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, in))
		send("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		send("ping", `{"type":"ping"}`)
		for i := 0; i < deltas; i++ {
			send("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word%d "}}`, i))
		}
		send("content_block_stop", `{"type":"content_block_stop","index":0}`)
		send("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":%d}}`, in, deltas))
		send("message_stop", `{"type":"message_stop"}`)
	})
}

// bareProxy is arm (b): httputil.ReverseProxy to target with the transport settings of
// serve's proxy (proxy.New) and streaming flushes, and nothing else.
func bareProxy(target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ResponseHeaderTimeout: 10 * time.Minute,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		FlushInterval: -1,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	// Full duplex: without it Go's HTTP/1 server closes the request body when the handler
	// starts the response, and a fast upstream (loopback) can answer before the transport
	// has finished with the body (its final read to EOF and Close); the transport then
	// closes the upstream connection and the stream breaks mid-answer. serve reads such
	// bodies whole first (proxy.bufferBody); the bare proxy streams them, as
	// httputil.ReverseProxy does.
	mux.Handle("/", http.StripPrefix("/claude-code", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	})))
	return mux, nil
}

// runRole runs this program as a helper child: "bare-proxy" (arm b) or "serve-profiled"
// (app.Main serve in this process under the CPU profiler, for the pprof tops).
func runRole(role string, args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch role {
	case "bare-proxy":
		if len(args) != 2 {
			return fmt.Errorf("bare-proxy: want PORT TARGET, got %q", args)
		}
		h, err := bareProxy(args[1])
		if err != nil {
			return err
		}
		srv := &http.Server{Addr: "127.0.0.1:" + args[0], Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { <-ctx.Done(); srv.Close() }()
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			return err
		}
		return nil
	case "serve-profiled":
		if len(args) != 3 {
			return fmt.Errorf("serve-profiled: want PORT CPUPROFILE HEAPPROFILE, got %q", args)
		}
		// SIGUSR2 turns the CPU profile on (into CPUPROFILE.<n>) or off, so the bench can
		// leave out what it does not measure; SIGUSR1 writes the live heap (as of the last GC)
		// to HEAPPROFILE.inuse. The allocations go to HEAPPROFILE at exit.
		runtime.MemProfileRate = 64 << 10
		var mu sync.Mutex
		var cpu *os.File
		files := 0
		toggle := func(off bool) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case cpu != nil:
				pprof.StopCPUProfile()
				cpu.Close()
				cpu = nil
			case !off:
				f, err := os.Create(fmt.Sprintf("%s.%d", args[1], files))
				if err != nil {
					return
				}
				files++
				if pprof.StartCPUProfile(f) != nil {
					f.Close()
					return
				}
				cpu = f
			}
		}
		sigs := make(chan os.Signal, 4)
		notifyProfileSignals(sigs)
		go func() {
			for s := range sigs {
				if isProfileToggle(s) {
					toggle(false)
					continue
				}
				if h, err := os.Create(args[2] + ".inuse"); err == nil {
					pprof.Lookup("heap").WriteTo(h, 0)
					h.Close()
				}
			}
		}()
		err := app.Main(ctx, []string{"serve", "--no-tray", "--port", args[0]})
		toggle(true)
		if h, herr := os.Create(args[2]); herr == nil {
			pprof.Lookup("allocs").WriteTo(h, 0)
			h.Close()
		}
		return err
	}
	return fmt.Errorf("unknown -role %q", role)
}

// startRole starts this executable in a helper role under startProc.
func startRole(name, base, role string, cfg serveConfig, args ...string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startProc(name, base, cfg, func(port int, _ string, env []string) *exec.Cmd {
		c := exec.Command(exe, append([]string{"-role", role, strconv.Itoa(port)}, args...)...)
		c.Env = env
		return c
	}, "/healthz")
}
