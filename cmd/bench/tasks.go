package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The long-session tasks: a generator in the manner of ContextBench's kv-store and
// log-triage (seed 003, "Benchmark method"), not their data. A session is the task statement,
// then batches (one user turn each, acknowledged by the model), then the questions (one user
// turn each). The generator keeps the truth of every question.

// Record sizes: a SET line or a log line is about 210–230 bytes, about 70–75 tokens at the
// strict fake's 3 bytes per token, so R1000 holds about 70k tokens of records and L1600 about
// 120k, close to run D's sizes (kv R1000 peaked at 99–101k tokens and never trimmed at 120k;
// log L1600 trimmed once).
const batchRecords = 25

type question struct {
	Kind  string // "lookup" or "count"
	Text  string
	Key   string // kv: the key; log lookup: the request id; count: "LEVEL service"
	Truth string
}

type task struct {
	Family    string // "kv-store" or "log-triage"
	Name      string // "R1000", "L6400"
	Records   int
	First     string
	Batches   []string
	Questions []question
}

func (t *task) label() string { return t.Family + " " + t.Name }

var regions = []string{"eu-west-3", "us-east-1", "ap-south-2", "sa-east-1", "eu-north-1"}

func hexN(r *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[r.IntN(16)]
	}
	return string(b)
}

// kvTask generates kv-store R<records>: SET lines in batches, about a fifth of them updating
// a key set in an earlier batch, then nQ GET questions whose truth is the key's last value
// with its #tag.
func kvTask(records, nQ int, seed uint64) *task {
	r := rand.New(rand.NewPCG(seed, uint64(records)))
	t := &task{Family: "kv-store", Name: fmt.Sprintf("R%d", records), Records: records}
	t.First = "TASK kv-store. I will send you batches of SET lines, one batch per message; each line is " +
		"`SET <key> = <value> #<tag> (<metadata>)`, and a later SET of the same key replaces its value. " +
		"Acknowledge each batch briefly. After the last batch I will ask GET questions, one per message: " +
		"answer each with `ANSWER: <value> #<tag>` for the key's current value, nothing else. " +
		"Bash and file tools are disabled: keep what you need in this conversation."
	type rec struct {
		value string
		last  int // index of the record that set it last
		batch int
		sets  int
	}
	keys := map[string]*rec{}
	var order []string
	ts := time.Date(2026, 10, 30, 9, 0, 0, 0, time.UTC)
	var b strings.Builder
	nBatches := (records + batchRecords - 1) / batchRecords
	for i := 0; i < records; i++ {
		batch := i / batchRecords
		if i%batchRecords == 0 {
			b.Reset()
			fmt.Fprintf(&b, "BATCH %d/%d\n", batch+1, nBatches)
		}
		var key string
		if len(order) > 20 && r.IntN(5) == 0 {
			for try := 0; try < 8; try++ {
				k := order[r.IntN(len(order))]
				if keys[k].batch < batch {
					key = k
					break
				}
			}
		}
		if key == "" {
			key = fmt.Sprintf("acct/%s/tenant-%04d/cfg-%06d", regions[r.IntN(len(regions))], r.IntN(10000), len(order)+1)
			keys[key] = &rec{}
			order = append(order, key)
		}
		value := hexN(r, 32) + " #" + hexN(r, 4)
		k := keys[key]
		k.value, k.last, k.batch = value, i, batch
		k.sets++
		ts = ts.Add(time.Duration(1+r.IntN(9)) * time.Second)
		fmt.Fprintf(&b, "SET %s = %s (source=billing-sync job=j-%04d written_at=%s ttl=%ds rev=%d checksum=%s)\n",
			key, value, r.IntN(10000), ts.Format(time.RFC3339), 3600*(1+r.IntN(48)), k.sets, hexN(r, 12))
		if i%batchRecords == batchRecords-1 || i == records-1 {
			t.Batches = append(t.Batches, strings.TrimRight(b.String(), "\n"))
		}
	}
	// Questions spread over the stream by where each key was last set (a third from each
	// third of the stream), about a third of them keys whose value was replaced.
	var updated, single [3][]string
	for _, k := range order {
		th := keys[k].last * 3 / records
		if keys[k].sets > 1 {
			updated[th] = append(updated[th], k)
		} else {
			single[th] = append(single[th], k)
		}
	}
	for th := 0; th < 3; th++ {
		r.Shuffle(len(updated[th]), func(i, j int) { updated[th][i], updated[th][j] = updated[th][j], updated[th][i] })
		r.Shuffle(len(single[th]), func(i, j int) { single[th][i], single[th][j] = single[th][j], single[th][i] })
	}
	for q := 0; len(t.Questions) < nQ && q < 3*records; q++ {
		th := q % 3
		pool := &single[th]
		if (q/3)%3 == 0 && len(updated[th]) > 0 {
			pool = &updated[th]
		}
		if len(*pool) == 0 {
			continue
		}
		k := (*pool)[0]
		*pool = (*pool)[1:]
		t.Questions = append(t.Questions, question{Kind: "lookup", Key: k, Truth: keys[k].value})
	}
	for i := range t.Questions {
		t.Questions[i].Text = fmt.Sprintf("QUESTION %d/%d: GET %s", i+1, len(t.Questions), t.Questions[i].Key)
	}
	return t
}

var (
	services = []string{"payments", "auth", "search", "checkout", "inventory", "notify", "profile", "gateway", "ledger", "media", "export", "billing"}
	messages = []string{
		"upstream timeout after 3 retries; circuit open for pool",
		"request served from cache; revalidation scheduled for shard",
		"slow query on replica; plan uses sequential scan of partition",
		"token refresh failed; falling back to cached credentials for node",
		"rate limit reached for tenant; request queued behind worker",
	}
)

// logTask generates log-triage L<lines>: log lines in batches (INFO 70%, WARN 20%, ERROR
// 10%, twelve services), then nQ questions alternating lookups (which user made request X)
// and counts (how many lines have level L and service S, over the whole log).
func logTask(lines, nQ int, seed uint64) *task {
	r := rand.New(rand.NewPCG(seed, uint64(lines)+1_000_000))
	t := &task{Family: "log-triage", Name: fmt.Sprintf("L%d", lines), Records: lines}
	t.First = "TASK log-triage. I will send you a service log in batches, one batch per message; each line is " +
		"`<time> <LEVEL> <service> req=<request id> user=<user id> … msg=\"…\"`. Acknowledge each batch briefly. " +
		"After the last batch I will ask questions, one per message: which user made a request, or how many " +
		"lines of the whole log have a given level and service. Answer each with `ANSWER: <user id>` or " +
		"`ANSWER: <number>`, nothing else. Bash and file tools are disabled: keep what you need in this conversation."
	type line struct{ level, service, req, user string }
	var all []line
	counts := map[string]int{}
	ts := time.Date(2026, 10, 30, 9, 0, 0, 0, time.UTC)
	var b strings.Builder
	nBatches := (lines + batchRecords - 1) / batchRecords
	for i := 0; i < lines; i++ {
		if i%batchRecords == 0 {
			b.Reset()
			fmt.Fprintf(&b, "BATCH %d/%d\n", i/batchRecords+1, nBatches)
		}
		level := "INFO"
		switch x := r.IntN(10); {
		case x == 0:
			level = "ERROR"
		case x <= 2:
			level = "WARN"
		}
		l := line{level: level, service: services[r.IntN(len(services))], req: "r-" + hexN(r, 8), user: fmt.Sprintf("u-%05d", r.IntN(100000))}
		all = append(all, l)
		counts[l.level+" "+l.service]++
		ts = ts.Add(time.Duration(50+r.IntN(900)) * time.Millisecond)
		status := 200
		if level == "ERROR" {
			status = 502
		} else if level == "WARN" {
			status = 429
		}
		fmt.Fprintf(&b, "%s %s %s req=%s user=%s region=%s latency_ms=%d status=%d trace=%s msg=\"%s %s-%d\"\n",
			ts.Format("2006-01-02T15:04:05.000Z"), l.level, l.service, l.req, l.user, regions[r.IntN(len(regions))],
			5+r.IntN(3000), status, hexN(r, 16), messages[r.IntN(len(messages))], l.service[:2], r.IntN(40))
		if i%batchRecords == batchRecords-1 || i == lines-1 {
			t.Batches = append(t.Batches, strings.TrimRight(b.String(), "\n"))
		}
	}
	used := map[string]bool{}
	for len(t.Questions) < nQ {
		k := len(t.Questions)
		if k%2 == 0 {
			// lookups spread over the log: early, middle, late
			pos := (k/2*7919 + len(all)/7) % len(all)
			l := all[pos]
			if used[l.req] {
				pos = (pos + 1) % len(all)
				l = all[pos]
			}
			used[l.req] = true
			t.Questions = append(t.Questions, question{Kind: "lookup", Key: l.req, Truth: l.user,
				Text: fmt.Sprintf("QUESTION %d/%d: Which user made request %s?", k+1, nQ, l.req)})
			continue
		}
		level := []string{"ERROR", "WARN"}[(k/2)%2]
		svc := services[(k*5)%len(services)]
		key := level + " " + svc
		if used[key] {
			svc = services[(k*5+1)%len(services)]
			key = level + " " + svc
		}
		used[key] = true
		t.Questions = append(t.Questions, question{Kind: "count", Key: key, Truth: fmt.Sprint(counts[key]),
			Text: fmt.Sprintf("QUESTION %d/%d: How many lines of the whole log have level %s and service %s?", k+1, nQ, level, svc)})
	}
	return t
}
