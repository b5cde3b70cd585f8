// Package mcp owns the MCP tools agents use to get trimmed turns back (seed 001 "Tools agents
// use", contract seed 002 "Search", "Which session a call reads", "SQL"):
//
//   - smart_compact_search: words (FTS5) or a regular expression over one or more session
//     databases, with row hits, total_matches and line_matches;
//   - smart_compact_sql: one read-only SELECT against the newest resolved session database;
//   - smart_compact_get: the full text of a compressed tool result (blobs/<id>.txt) in
//     12,000-character pages (DESIGN.md §6);
//   - context_status: the events summary of `smarter-compact status` over the last hours.
//
// New builds a Server over an opened store.Root; it serves over stdio (ServeStdio, the
// `smarter-compact mcp` command) and over streamable HTTP (Handler, mounted at /mcp on the
// serve listener). Every tool call appends one line of counts to <root>/tool-calls.jsonl.
//
// It reads the context store through package store only and never writes a session
// database, so it works while serve is down. In stdio mode nothing but JSON-RPC goes to the
// output writer; logs go to Options.Log. It must not import proxy, web, installer or app;
// only app imports it. mcp-go's mcp package is imported as mcpgo everywhere, since this
// package is also named mcp (DESIGN.md §3).
package mcp
