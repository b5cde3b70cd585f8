//go:build windows

package installer

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

const stopChildEnv = "SMARTER_COMPACT_TEST_STOP_CHILD"

// TestServiceStopChild is the service TestServiceStopWaitsForExit stops, run as a child
// process of the test binary: it answers /healthz, takes stop requests, and after one goes
// quiet at once but lives on for 3 s more, as serve does while the tray and the store close.
func TestServiceStopChild(t *testing.T) {
	name, port := os.Getenv(stopChildEnv), os.Getenv(stopChildEnv+"_PORT")
	if name == "" {
		t.Skip("helper process of TestServiceStopWaitsForExit; runs only as its child")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	stop, release, err := StopRequests(name, p)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	go func() { _ = http.Serve(ln, mux) }()
	<-stop
	ln.Close()
	time.Sleep(3 * time.Second)
	release()
}

// TestServiceStopWaitsForExit: service stop returns once the service process has exited, not
// when /healthz goes quiet (an MSI removing the exe right after would find it locked).
func TestServiceStopWaitsForExit(t *testing.T) {
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	name := "sc-stop-test-" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(os.Args[0], "-test.run=^TestServiceStopChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), stopChildEnv+"="+name, stopChildEnv+"_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	proc, err := windows.OpenProcess(windows.SYNCHRONIZE, false, uint32(cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(proc)
	ctx := context.Background()
	if !waitHealth(ctx, port, true, 30*time.Second) {
		t.Fatal("the child service never answered /healthz")
	}
	home, _ := os.UserHomeDir()
	exe, _ := os.Executable()
	cfg := ServiceConfig{Name: name, Exe: exe, Args: []string{"serve"}, Home: home, Port: port, Wait: 30 * time.Second}
	res, err := ServiceStop(ctx, cfg)
	if err != nil || !res.Changed {
		t.Fatalf("ServiceStop: changed %v, err %v", res.Changed, err)
	}
	if ev, err := windows.WaitForSingleObject(proc, 0); err != nil || ev != windows.WAIT_OBJECT_0 {
		t.Errorf("ServiceStop returned while the service process still runs (wait %#x, %v)", ev, err)
	}
	if res.State.Running {
		t.Error("the state says it still answers")
	}
}
