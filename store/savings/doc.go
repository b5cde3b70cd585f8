// Package savings owns the price table and the money figures of issue 15 (Deliver 1): what
// the model calls through the proxy cost, what the same calls would have cost untrimmed,
// and the difference in US dollars and percent, today, this week and per session, agent and
// model. The token counts come from the store (store.Root.Savings, one record per usage
// event); this package only prices and sums them, so a price edited in config.toml applies
// to past requests too. A Figure's text is said here once (Figure.Line, PercentText, USD). It imports store only (it lives under store for that rule), and
// writes nothing. web, app/tray and app import it. docs/savings.md describes the estimate.
package savings
