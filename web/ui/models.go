// Package ui holds the dashboard's templ components and the view models they render
// (DESIGN.md §9). Components take these plain structs, already formatted by package web;
// they read no store and change no state. No component writes an inline script, a style
// attribute or an hx-on handler: the CSP (default-src 'self') would refuse them.
//
// Only package web imports it; it imports nothing of ours.
package ui

// Page is what every full page shares: the title, the current navigation entry, the CSRF
// token the forms and htmx carry, and the version query that busts cached static files.
type Page struct {
	Title   string
	Nav     string // overview, sessions, search, settings; "" for none
	CSRF    string
	AssetV  string // appended to static URLs as ?v=
	Version string // the service version, shown in the footer
}

// Service is the overview's service panel.
type Service struct {
	Version    string
	Addr       string
	StartedAt  string // ISO 8601 UTC
	Uptime     string // "3h 12m"
	ConfigPath string
	StoreDir   string
	Tray       string
}

// Live is the part of the overview that htmx polls: switches and the 24 h numbers.
type Live struct {
	// PollURL is /ui/live?rev=<revision>&data=<stamp>: the server answers 204 while neither
	// changed.
	PollURL     string
	Revision    uint64
	CSRF        string
	Master      bool
	Paused      bool
	EnvLock     string
	ConfigError string
	Agents      []Agent
	Stats       Stats
	Daily       BarChart
	Service     Service
	// FirstSteps is what to do next on a dashboard with nothing stored yet; nil otherwise.
	FirstSteps *FirstSteps
	Health     Health  // health.go
	Savings    Savings // savings.go
	// Stale is set when the service runs an older build than the installed binary: the
	// builds and the command that restarts it.
	Stale *Stale
}

// Stale is the proxy_stale banner: the running and the installed build, and the restart.
type Stale struct {
	Running, Installed, Restart string
}

// Agent is one agent's row of switches.
type Agent struct {
	Agent        string
	Mode         string // on, off, follow
	Settable     bool   // false for "unknown", which always follows the master switch
	Trimming     bool
	Why          string
	Wiring       string
	WiringDetail string
	Route        string
}

// Stats are the last-24-hours numbers, formatted.
type Stats struct {
	Hours       int
	Problem     string // the numbers could not be read; the rest is "–" then
	Trims       string
	TokensSaved string
	FailOpens   string
	Requests    string
	HitRatio    string // "93.1 %" or "–"
	NewCut      string // average cache creation per request after a new cut, "–" without any
	NewCutReqs  int64
	Other       string
	OtherReqs   int64
	Sessions    string
	Skipped     []string // "sid: why"
	Errors      []FailOpen
}

// FailOpen is one of the newest fail-open events.
type FailOpen struct {
	At, Session, SessionHref, Location, Error string
}

// BarChart is a server-rendered SVG bar chart (daily tokens saved).
type BarChart struct {
	TestID  string
	Title   string // the SVG's <title> and aria-label
	Width   int    // frame width in chart units: x coordinates are drawn as percentages of it
	Height  int    // height in pixels (y coordinates are pixels)
	Bars    []Bar
	YTicks  []Tick
	XAxisY  float64
	PlotX0  float64
	PlotX1  float64
	Summary string // the numbers in words: the caption, and <desc> for screen readers
}

// Bar is one bar with its value written above it and in its <title>.
type Bar struct {
	X, Y, W, H     float64
	Label          string // the x label (date)
	LabelX, LabelY float64
	Value          string
	ValueY         float64
	Title          string
	Minor          bool // every other bar back from the newest: unlabelled in narrow windows
}

// Tick is one y-axis gridline with its label.
type Tick struct {
	Y     float64
	Label string
}

// LineChart is the prompt tokens per request chart with trims marked.
type LineChart struct {
	TestID string
	Title  string
	Width  int
	Height int
	Points string // polyline points "x,y x,y …"
	// Untrimmed and Threshold are the polylines of what would have been sent untrimmed
	// and of the trim threshold ("" without savings records).
	Untrimmed, Threshold string
	Dots                 []Dot
	Marks                []Mark
	YTicks               []Tick
	XLabels              []XLabel
	XAxisY               float64
	PlotX0               float64
	PlotX1               float64
	PlotY0               float64
	Empty                string // why there is no line, "" when there is one
	Summary              string
}

// Dot is one request on the line.
type Dot struct {
	X, Y  float64
	Title string
}

// Mark is a trim: a vertical line at the request it applied to.
type Mark struct {
	X     float64
	Title string
}

// XLabel is a label under the x axis.
type XLabel struct {
	X      float64
	Label  string
	Anchor string // start, middle, end
}

// SessionsPage is the sessions list.
type SessionsPage struct {
	Page
	Filter SessionsFilter
	Table  SessionsTable
}

// SessionsFilter is the list's filter form.
type SessionsFilter struct {
	Agent  string
	Q      string
	Sort   string
	Dir    string
	Agents []string
}

// SessionsTable is the part htmx swaps when the filter or the sort changes.
type SessionsTable struct {
	Headers []SortHeader
	Rows    []SessionRow
	Total   int // sessions in the store
	Shown   int
}

// SortHeader is one column heading; Href sorts by it (toggling the direction when it is
// the current sort), "" for a column that does not sort.
type SortHeader struct {
	Label string
	Href  string
	Sort  string // "ascending", "descending", "" (aria-sort)
	Num   bool
}

// SessionRow is one line of the sessions table.
type SessionRow struct {
	SID, Href, Agent, Cwd         string
	Project                       string // the working directory's base name; "" when not registered
	FirstPrompt                   string // "" when the session has no typed prompt stored
	LastActivity, LastActivityISO string
	Rows, InContext, Trimmed      string
	Trims, Requests, Size         string
	LastPrompt                    string
	Problem                       string
}

// SessionPage is one session's page.
type SessionPage struct {
	Page
	SID         string
	Facts       []Fact
	Chart       LineChart
	Usage       []UsageRow
	UsageNote   string
	Rows        []RowView
	Total       int64
	From, To    int64 // seq of the first and last row shown
	PrevHref    string
	NextHref    string
	FirstHref   string
	EventsError string
	Problem     string // the rows could not be read (the database is damaged, newer, locked)
	// Recall is what the session's cuts carry after the pointer: the framed recall and
	// the pending-ingest line, one entry per thread (issue 17).
	Recall []string
}

// Fact is one label: value pair of a summary list.
type Fact struct{ Label, Value string }

// UsageRow is one events row in the usage table.
type UsageRow struct {
	N          int // request number (usage events only), 0 for other kinds
	At         string
	Kind       string // usage, trim, fail_open
	Model      string
	Trimmed    string // whole, earlier cut, new cut, –
	Input      string
	CacheRead  string
	CacheWrite string
	Output     string
	Prompt     string
	Detail     string // trim: before → after, dropped; fail_open: error and location
	NewCut     bool
}

// RowView is one messages row on the session page.
type RowView struct {
	Seq          int64
	ID           string // seq-<n>
	Role, Kind   string
	Name         string
	Text         string
	Cut          bool   // Text is the head of a longer text
	Chars        string // "1,204 characters"
	BlobHref     string
	InContext    bool
	TrimmedAtSeq int64
	CutHref      string // the row the cut was made at, on whichever page holds it
	TrimmedAt    string
	CreatedAt    string
	CutAt        bool       // a cut was made at this row (a trimmed row's trimmed_at_seq is this seq)
	PointBefore  *TrimPoint // a trim point drawn before this row
}

// TrimPoint marks where the rows one cut dropped end on the page.
type TrimPoint struct {
	Text string
}

// BlobPage is the blob viewer.
type BlobPage struct {
	Page
	ID       string
	Text     string
	From, To string // the bytes shown, counted from 1: "1", "65,536"
	Total    string // the blob's size in bytes: "11,550"
	PrevHref string
	NextHref string
	// The session row the blob belongs to, when the link named it; "" otherwise.
	SessionID   string
	Seq         int64 // 0 when only the session is known
	SessionHref string
}

// SearchPage is the search page.
type SearchPage struct {
	Page
	Form    SearchForm
	Results SearchResults
}

// SearchForm is what was asked.
type SearchForm struct {
	Q, Pattern, Role, InContext string
}

// SearchResults is the part htmx swaps as the user types.
type SearchResults struct {
	Asked    bool   // a query or pattern was given
	Error    string // bad input (e.g. a pattern that does not compile), said so the user can fix it
	ErrorFor string // "q" or "pattern": the input the error is about
	Hits     []SearchHit
	Total    int
	Lines    int
	Sessions int
	Skipped  []string
	TimedOut bool
	// NotSearched counts the oldest sessions a live search (as you type) left out to answer
	// quickly; the Search button searches them too.
	NotSearched int
	Limit       int
	Truncated   bool // more hits than Limit
}

// SearchHit is one matching row.
type SearchHit struct {
	SID, Href  string
	Seq        int64
	Role, Kind string
	Name       string
	InContext  bool
	Excerpt    []Seg
	BlobHref   string
	Agent, Cwd string
}

// Seg is a piece of an excerpt; Mark pieces matched.
type Seg struct {
	Text string
	Mark bool
}

// SettingsPage is the settings form.
type SettingsPage struct {
	Page
	ConfigPath string
	Sections   []SettingSection
	Saved      []string // keys saved by the last POST
	Restart    []string // of those, the keys that need a restart
	Invalid    bool     // the last POST had invalid values: nothing was saved
	Problems   []string // messages of a failed save about keys the form does not show
	Unchanged  bool     // the last POST changed nothing
}

// SettingSection is one config.toml table.
type SettingSection struct {
	Name   string
	Fields []SettingField
}

// SettingField is one key.
type SettingField struct {
	Key   string
	ID    string // a DOM id for the input
	Label string
	Value string // what the input shows: the saved value, or what was typed
	// Orig is the saved value the page showed when it was loaded, sent back in the hidden
	// field orig.<Key>: a save sends only the keys whose value differs from it, and refuses
	// one that config.toml changed since (another tab, a hand edit).
	Orig     string
	Default  string
	InEffect string
	Accepts  string
	Help     string
	Env      string // the overriding variable; the input is read-only then
	Restart  bool
	Kind     string
	Error    string
}
