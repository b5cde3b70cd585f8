//go:build e2e

// TestQuickRun builds the binary and runs for about a minute: it runs in `make e2e`, not in
// `make test`.

package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestQuickRun builds the binary, runs every part of the benchmark at -quick sizes and checks
// the report: every table is there with numbers that parse, every plot is well-formed SVG,
// and smart compaction kept its promises (each prompt under threshold + the newest turn, every
// lookup and count right, trims and recall calls actually made).
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping: builds the binary and runs the benchmark at -quick sizes (about a minute); run without -short")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "smarter-compact")
	build := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", bin, "../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The helper roles re-execute this test binary with -role; TestMain routes them.
	out := filepath.Join(dir, "docs")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := run(ctx, options{Bin: bin, Out: out, Tmp: filepath.Join(dir, "tmp"), Quick: true, Seed: 42, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}

	md, err := os.ReadFile(filepath.Join(out, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	tables := parseTables(string(md))
	for _, head := range []string{
		"| item | value |",
		"| measure | today | aim | result | verdict |",
		"| aim | result | verdict |",
		"| request | n | body KB |",
		"| sessions | direct req/s |",
		"| task | records tokens |",
		"| case | rows | insert rows/s |",
	} {
		n := 0
		for _, tb := range tables {
			if strings.HasPrefix(tb.header, head) {
				n++
				if len(tb.rows) == 0 {
					t.Errorf("table %q has no rows", head)
				}
			}
		}
		if n == 0 {
			t.Errorf("no table starting %q in benchmarks.md", head)
		}
	}
	text := map[string]bool{"item": true, "measure": true, "today": true, "value": true, "aim": true, "result": true, "verdict": true, "request": true,
		"task": true, "arm": true, "case": true, "sweep": true}
	for _, tb := range tables {
		for _, row := range tb.rows {
			for i, cell := range row {
				if i >= len(tb.cols) {
					t.Errorf("table %q: row %q has more cells than the header", tb.header, row)
					break
				}
				if text[tb.cols[i]] || cell == "—" {
					continue
				}
				if _, err := strconv.ParseFloat(cell, 64); err != nil {
					t.Errorf("table %q, column %q: %q is not a number", tb.header, tb.cols[i], cell)
				}
			}
		}
	}

	for _, name := range []string{"overhead-latency.svg", "throughput.svg", "replay-prompt-kv-store.svg", "replay-prompt-log-triage.svg", "replay-cost.svg", "scale-search.svg"} {
		b, err := os.ReadFile(filepath.Join(out, "bench", name))
		if err != nil {
			t.Error(err)
			continue
		}
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Errorf("%s: %v", name, err)
				break
			}
		}
	}

	trims, recalls := 0, 0
	for _, rc := range res.Replay {
		s := rc.Smart
		if s.Over > 0 {
			t.Errorf("%s: %d smart-compaction prompts over threshold + the newest turn (worst by %d tokens)", rc.Task.label(), s.Over, s.MaxOver)
		}
		if s.LookupOK != s.LookupN || s.CountOK != s.CountN {
			t.Errorf("%s: smart compaction answered lookups %d/%d, counts %d/%d: %q", rc.Task.label(), s.LookupOK, s.LookupN, s.CountOK, s.CountN, s.Wrong)
		}
		if k := rc.Keep; k.LookupOK != k.LookupN || k.CountOK != k.CountN || k.Trims != 0 {
			t.Errorf("%s: keep-everything answered lookups %d/%d, counts %d/%d with %d trims", rc.Task.label(), k.LookupOK, k.LookupN, k.CountOK, k.CountN, k.Trims)
		}
		if s.Peak >= rc.Keep.Peak && s.Trims > 0 {
			t.Errorf("%s: trimmed %d times but its peak prompt %d is not below keep-everything's %d", rc.Task.label(), s.Trims, s.Peak, rc.Keep.Peak)
		}
		trims += s.Trims
		recalls += s.Searches + s.SQLs
	}
	if trims == 0 || recalls == 0 {
		t.Errorf("the quick replay made %d trims and %d recall calls: it must exercise both", trims, recalls)
	}
	for _, c := range res.Overhead.Cases {
		for arm := 0; arm < armPeer; arm++ { // the peer arm runs only with -peers

			if len(c.TTLB[arm]) != c.N || len(c.TTFB[arm]) != c.N {
				t.Errorf("%dk %s: %s has %d samples, want %d", c.Tokens/1000, c.Kind, armNames[arm], len(c.TTLB[arm]), c.N)
			}
		}
	}
	// A quick run's profile holds few samples: the request path or the store's write queue
	// may lead it, so it is checked for our code, not for one function.
	ours := func(top string) bool {
		return strings.Contains(top, "smarter-compact/proxy.") || strings.Contains(top, "smarter-compact/store.")
	}
	if pf := res.Overhead.Profiles; res.Overhead.CutChecked == 0 || pf == nil || !ours(pf.WarmCum) || !ours(pf.CutCum) {
		t.Errorf("overhead: %d new cuts checked; profiles %+v", res.Overhead.CutChecked, pf)
	}
}

type table struct {
	header string
	cols   []string
	rows   [][]string
}

func cells(line string) []string {
	f := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// parseTables returns the markdown tables of md: header, column names, data rows.
func parseTables(md string) []table {
	var out []table
	lines := strings.Split(md, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "|") || !strings.HasPrefix(lines[i+1], "| ---") {
			continue
		}
		tb := table{header: lines[i], cols: cells(lines[i])}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			tb.rows = append(tb.rows, cells(lines[j]))
		}
		out = append(out, tb)
		i = j
	}
	return out
}

// TestMain lets the test binary serve as the benchmark's helper children (-role …), as the
// real program does, since os.Executable is the test binary here.
func TestMain(m *testing.M) {
	for i, a := range os.Args {
		if a == "-role" && i+1 < len(os.Args) {
			if err := runRole(os.Args[i+1], os.Args[i+2:]); err != nil {
				os.Stderr.WriteString("bench: " + err.Error() + "\n")
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}
