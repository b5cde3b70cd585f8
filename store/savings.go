package store

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// The per-request savings records (issue 15, Deliver 1): sessions/<sid>.savings.jsonl, one
// JSON line per usage event the proxy wrote, with the tokens the untrimmed request would have
// been billed for. The events table of schema v3 has no column for them and the contract
// allows none without a schema change, so they live beside the database, like
// tool-calls.jsonl: telemetry the dashboard, `status` and the tray read, not part of the
// session rewrite contract. Retention deletes the file with its session.

// savingsSuffix names a session's savings records.
const savingsSuffix = ".savings.jsonl"

// SavingsRecord is one line of sessions/<sid>.savings.jsonl: one model call the proxy
// handled, its provider-reported usage (contract: Events, usage) and the estimate of the same
// call without trimming and compression (docs/savings.md).
type SavingsRecord struct {
	At         string `json:"at"` // ISO 8601 UTC, whole seconds, as events.at
	Model      string `json:"model"`
	ThreadRoot string `json:"thread_root,omitempty"`
	Trimmed    int64  `json:"trimmed"` // 0 whole, 1 earlier cut, 2 new cut (events.trimmed)
	// The provider's counts for the call as sent (events' usage columns; input excludes cache
	// reads and writes). A count the provider did not report is 0 here: a record is written
	// only for a call that reported its prompt.
	InputTokens         int64 `json:"input_tokens"`
	CacheReadTokens     int64 `json:"cache_read_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
	// RemovedTokens is the estimate of the prompt tokens trimming and compression took out of
	// the request (≥ 0); the untrimmed prompt is the sent one plus these.
	RemovedTokens int64 `json:"removed_tokens"`
	// Untrimmed* are the estimated counts of the untrimmed request, by how they would have
	// been billed (cache effects included); output is assumed unchanged.
	UntrimmedInputTokens         int64 `json:"untrimmed_input_tokens"`
	UntrimmedCacheReadTokens     int64 `json:"untrimmed_cache_read_tokens"`
	UntrimmedCacheCreationTokens int64 `json:"untrimmed_cache_creation_tokens"`
	// ThresholdTokens is the trim threshold that applied to the request.
	ThresholdTokens int64 `json:"threshold_tokens"`
}

// SentPromptTokens is the prompt the provider counted: input + cache read + cache creation.
func (r *SavingsRecord) SentPromptTokens() int64 {
	return r.InputTokens + r.CacheReadTokens + r.CacheCreationTokens
}

// UntrimmedPromptTokens is the estimated prompt of the untrimmed request.
func (r *SavingsRecord) UntrimmedPromptTokens() int64 {
	return r.UntrimmedInputTokens + r.UntrimmedCacheReadTokens + r.UntrimmedCacheCreationTokens
}

// maxSavingsLine bounds one line when reading; a record is about 400 bytes.
const maxSavingsLine = 64 << 10

// AppendSavings appends rec as one line to sessions/<sid>.savings.jsonl (created mode 600).
// One write per line with O_APPEND, under the file's lock, so concurrent appends of one
// session do not interleave. The file stays open for the next line (savings_files.go).
func (r *Root) AppendSavings(sid string, rec SavingsRecord) error {
	if err := checkSID(sid); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("append savings record: %w", err)
	}
	if err := r.savings.appendLine(r.sessionFile(sid, savingsSuffix), append(b, '\n')); err != nil {
		return fmt.Errorf("append savings record: %w", err)
	}
	return nil
}

// SessionSavings returns the session's savings records in the order they were written
// (nil, nil when it has none). A line that does not parse (a write cut short) is skipped.
func (r *Root) SessionSavings(sid string) ([]SavingsRecord, error) {
	if err := checkSID(sid); err != nil {
		return nil, err
	}
	return readSavings(r.sessionFile(sid, savingsSuffix))
}

func readSavings(path string) ([]SavingsRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read savings records: %w", err)
	}
	var out []SavingsRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxSavingsLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec SavingsRecord
		if json.Unmarshal(line, &rec) == nil && rec.At != "" {
			out = append(out, rec)
		}
	}
	return out, nil // a line over maxSavingsLine ends the read; what came before counts
}

// SavingsGroup sums the savings records of one session, model and UTC day.
type SavingsGroup struct {
	Session string
	Agent   string // from the registration or trim state (SessionInfo.Agent); "" unknown
	Model   string
	Date    string // 2026-12-02
	// Requests counts the records; Sent and Untrimmed sum their counts.
	Requests  int64
	Sent      SavingsCounts
	Untrimmed SavingsCounts
	// RemovedTokens sums the records' RemovedTokens.
	RemovedTokens int64
}

// SavingsCounts are summed token counts by how they are billed.
type SavingsCounts struct {
	Input, CacheRead, CacheCreation, Output int64
}

// Savings returns the savings records of every session with at on or after since's UTC day,
// summed per session, model and day, sorted by session, day and model. Each session's file is
// read again only when its size or mtime changed (the cache Sessions uses). The error is for
// an unreadable sessions/ folder or a cancelled ctx; a session whose records cannot be read
// is left out.
func (r *Root) Savings(ctx context.Context, since time.Time) ([]SavingsGroup, error) {
	files, err := r.listSessionFiles()
	if err != nil {
		return nil, fmt.Errorf("savings: %w", err)
	}
	from := since.UTC().Format(time.DateOnly)
	var out []SavingsGroup
	for i := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f := &files[i]
		if f.stamp.savings.size < 0 || checkSID(f.sid) != nil {
			continue
		}
		for _, g := range r.cachedSavings(f) {
			if g.Date >= from {
				out = append(out, g)
			}
		}
	}
	r.dash.prune(files)
	slices.SortFunc(out, func(a, b SavingsGroup) int {
		return cmp.Or(strings.Compare(a.Session, b.Session), strings.Compare(a.Date, b.Date), strings.Compare(a.Model, b.Model))
	})
	return out, nil
}

// cachedSavings returns the session's groups, from the cache while its savings file and
// registration keep their stamps.
func (r *Root) cachedSavings(f *sessionFiles) []SavingsGroup {
	c := &r.dash
	key := [2]fileStamp{f.stamp.savings, f.stamp.reg}
	c.mu.Lock()
	e := c.savings[f.sid]
	c.mu.Unlock()
	if e != nil && e.key == key {
		return e.groups
	}
	recs, err := readSavings(r.sessionFile(f.sid, savingsSuffix))
	if err != nil {
		return nil
	}
	agent, _ := r.sessionAgent(f.sid)
	groups := groupSavings(f.sid, agent, recs)
	if f.settled {
		c.mu.Lock()
		if c.savings == nil {
			c.savings = map[string]*savingsEntry{}
		}
		c.savings[f.sid] = &savingsEntry{key: key, groups: groups}
		c.mu.Unlock()
	}
	return groups
}

type savingsEntry struct {
	key    [2]fileStamp // savings file, registration
	groups []SavingsGroup
}

// groupSavings sums recs per model and day.
func groupSavings(sid, agent string, recs []SavingsRecord) []SavingsGroup {
	type k struct{ model, date string }
	idx := map[k]int{}
	var out []SavingsGroup
	for i := range recs {
		rec := &recs[i]
		date := rec.At
		if len(date) >= len("2006-01-02") {
			date = date[:len("2006-01-02")]
		}
		key := k{rec.Model, date}
		j, ok := idx[key]
		if !ok {
			j = len(out)
			idx[key] = j
			out = append(out, SavingsGroup{Session: sid, Agent: agent, Model: rec.Model, Date: date})
		}
		g := &out[j]
		g.Requests++
		g.Sent.Input += rec.InputTokens
		g.Sent.CacheRead += rec.CacheReadTokens
		g.Sent.CacheCreation += rec.CacheCreationTokens
		g.Sent.Output += rec.OutputTokens
		g.Untrimmed.Input += rec.UntrimmedInputTokens
		g.Untrimmed.CacheRead += rec.UntrimmedCacheReadTokens
		g.Untrimmed.CacheCreation += rec.UntrimmedCacheCreationTokens
		g.Untrimmed.Output += rec.OutputTokens
		g.RemovedTokens += rec.RemovedTokens
	}
	return out
}
