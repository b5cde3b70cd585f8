//go:build e2e

package e2e_test

// The kill -9 soak (issue 16, item 3): concurrent Claude Code sessions run against the real
// binary, which is killed with SIGKILL at a random moment and started again; every message
// whose answer the client had fully received (the stream reached message_stop) must be in
// SQLite. It reports its figure and is not a timed test: the kill moment is random, and the
// check is a count.

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smarter-compact/smarter-compact/proxy/fakeupstream"
)

// Soak settings, from the environment: SMARTER_COMPACT_SOAK_TRIALS (default 5),
// SMARTER_COMPACT_SOAK_SESSIONS (concurrent sessions per trial, default 8), and
// SMARTER_COMPACT_SOAK_BIN, another build of smarter-compact to measure instead of this
// checkout's (the figure before a change: build main into a file and point this at it).
func soakSetting(t *testing.T, env string, def int) int {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive count", env, v)
		}
		return n
	}
	return def
}

// soakReply answers a turn's question with a tool call and its tool result with a text,
// each naming the session and turn, so every row of the soak is unique.
func soakReply(req *fakeupstream.Request) fakeupstream.Reply {
	m := soakTurnRE(req.LastUserText())
	if req.EndsWithToolResults() {
		return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.Text("SOAK-DONE " + m)}}
	}
	return fakeupstream.Reply{Content: []fakeupstream.Block{fakeupstream.ToolUse("Bash",
		map[string]any{"command": "cat soak-" + strings.ReplaceAll(m, " ", "-") + ".log"})}}
}

// soakTurnRE returns the "s=<n> t=<n>" of a soak turn's user text.
func soakTurnRE(text string) string {
	i := strings.Index(text, "s=")
	if i < 0 {
		return "?"
	}
	f := strings.Fields(text[i:])
	if len(f) < 2 {
		return "?"
	}
	return f[0] + " " + strings.TrimSuffix(f[1], ":")
}

// soakAcked is one request whose answer the client read to message_stop: the texts of the
// message it sent last and of the reply, as they are stored.
type soakAcked struct {
	sid          string
	sent, answer string
}

func TestE2EKillSoak(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the soak kills serve with SIGKILL, which Windows does not have")
	}
	bin := os.Getenv("SMARTER_COMPACT_SOAK_BIN")
	if bin == "" {
		bin = buildBinary(t)
	}
	trials := soakSetting(t, "SMARTER_COMPACT_SOAK_TRIALS", 5)
	nSessions := soakSetting(t, "SMARTER_COMPACT_SOAK_SESSIONS", 8)
	fake := fakeupstream.Start(t, fakeupstream.Options{Reply: soakReply})
	var totalSent, totalAnswers, lostSent, lostAnswers int
	for trial := range trials {
		dir := t.TempDir()
		config := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(config, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"SMARTER_COMPACT_CONFIG=" + config, "SMARTER_COMPACT_UPSTREAM_ANTHROPIC=" + fake.URL}
		srv := startKillable(t, bin, dir, env)
		var mu sync.Mutex
		var acked []soakAcked
		var wg sync.WaitGroup
		for s := range nSessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cs := &concSession{n: s, sid: fmt.Sprintf("soak-%d-%d", trial, s), model: "claude-opus-5-5",
					url: srv.url() + "/claude-code/v1/messages?beta=true", http: &http.Client{Timeout: 30 * time.Second}}
				st := &concStats{}
				for turn := 1; ; turn++ {
					text := fmt.Sprintf("SOAK-TURN s=%d t=%d: read the next file.", s, turn)
					cs.msgs = append(cs.msgs, map[string]any{"role": "user", "content": text})
					blocks, ok := cs.send(st)
					if !ok {
						return
					}
					if len(blocks) != 1 || blocks[0]["type"] != "tool_use" {
						return
					}
					in := fmt.Sprintf(`{"command":"cat soak-s=%d-t=%d.log"}`, s, turn)
					mu.Lock()
					acked = append(acked, soakAcked{cs.sid, text, in})
					mu.Unlock()
					out := fmt.Sprintf("SOAK-OUT s=%d t=%d", s, turn)
					cs.msgs = append(cs.msgs, map[string]any{"role": "user", "content": []any{
						map[string]any{"type": "tool_result", "tool_use_id": blocks[0]["id"], "content": out}}})
					if _, ok := cs.send(st); !ok {
						return
					}
					mu.Lock()
					acked = append(acked, soakAcked{cs.sid, out, fmt.Sprintf("SOAK-DONE s=%d t=%d", s, turn)})
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Duration(300+rand.IntN(1700)) * time.Millisecond) // the random kill point
		if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-srv.done
		wg.Wait()

		// start again over the same state directory, then count what the database holds
		again := startKillable(t, bin, dir, env)
		if err := again.waitHealthy(15 * time.Second); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		sent, answers, ls, la := soakCount(t, again.stateDir, acked)
		mu.Unlock()
		totalSent, totalAnswers, lostSent, lostAnswers = totalSent+sent, totalAnswers+answers, lostSent+ls, lostAnswers+la
		t.Logf("trial %d: %d requests answered before the kill; lost %d of their last messages and %d of their answers", trial, sent, ls, la)
		again.cmd.Process.Signal(os.Interrupt)
		<-again.done
	}
	t.Logf("kill -9 soak (%s): %d trials x %d sessions: %d fully answered requests; missing from SQLite: %d sent messages, %d answers",
		filepath.Base(bin), trials, nSessions, totalSent, lostSent, lostAnswers)
	if totalSent == 0 {
		t.Fatal("no request was answered before the kill; the soak measured nothing")
	}
	if lostSent+lostAnswers > 0 {
		t.Errorf("%d messages whose answer the client had fully received are not in SQLite", lostSent+lostAnswers)
	}
}

// soakCount counts the acked requests whose last sent message and answer are stored.
func soakCount(t *testing.T, stateDir string, acked []soakAcked) (sent, answers, lostSent, lostAnswers int) {
	t.Helper()
	dbs := map[string]*sql.DB{}
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	has := func(sid, text string) bool {
		db := dbs[sid]
		if db == nil {
			path := filepath.Join(stateDir, "context", "sessions", sid+".db")
			if _, err := os.Stat(path); err != nil {
				return false
			}
			var err error
			// read-write: opening replays the WAL a killed writer left, as serve's next open would
			if db, err = sql.Open("sqlite3", "file:"+path); err != nil {
				t.Fatal(err)
			}
			dbs[sid] = db
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM messages WHERE text = ?`, text).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sid, err)
		}
		return n > 0
	}
	for _, a := range acked {
		sent++
		answers++
		if !has(a.sid, a.sent) {
			lostSent++
		}
		if !has(a.sid, a.answer) {
			lostAnswers++
		}
	}
	return sent, answers, lostSent, lostAnswers
}

// startKillable runs serve like launchServe but expects to be killed: its cleanup kills
// a serve still running and reports nothing.
func startKillable(t *testing.T, bin, dir string, env []string) *serveProc {
	t.Helper()
	for attempt := 0; attempt < 3; attempt++ {
		port := freePort(t)
		p := &serveProc{port: port, stateDir: filepath.Join(dir, "state"), log: &syncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(bin, "serve", "--no-tray")
		p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"),
			"SMARTER_COMPACT_STATE_DIR=" + p.stateDir, "CONTEXT_PROXY_PORT=" + strconv.Itoa(port)}, env...)
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start serve: %v", err)
		}
		go func() { p.err = p.cmd.Wait(); close(p.done) }()
		if err := p.waitHealthy(15 * time.Second); err == nil {
			t.Cleanup(func() {
				select {
				case <-p.done:
				default:
					p.cmd.Process.Kill()
					<-p.done
				}
			})
			return p
		}
		p.cmd.Process.Kill()
		<-p.done
		if !strings.Contains(p.log.String(), "in use") {
			break
		}
	}
	t.Fatal("serve did not start")
	return nil
}
