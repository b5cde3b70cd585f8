// Package mcp will own the MCP tools agents use to get trimmed turns back
// (smart_compact_search, smart_compact_sql, smart_compact_get, context_status; seed 001
// "Tools agents use", contract seed 002), served over stdio (the `smarter-compact mcp`
// command) and over streamable HTTP at /mcp on the serve listener.
//
// It reads the context store through package store only (read-only), so it works while
// serve is down. It must not write to stdout except JSON-RPC in stdio mode, and must not
// import proxy, web, installer or app. Only app imports it. Import mcp-go's package under
// one alias everywhere, since this package is also named mcp (DESIGN.md §3).
//
// Empty for now: a later issue fills it.
package mcp
