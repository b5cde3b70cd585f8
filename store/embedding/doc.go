// Package embedding fills the vectors table of session databases in the background
// (contract: Vectors): the client of an OpenAI-compatible embeddings endpoint (POST
// <url>/embeddings) and the Embedder, a pool of workers that embeds one database each at a
// time, trimmed rows first, in adaptive batches of 4 to 32, setting aside rows that fail
// alone and waiting 60 s on an endpoint that looks down.
//
// It owns the HTTP side of vectors so that store stays persistence only: it imports store
// (rows to embed, vectors to put) and the standard library, nothing else of this module. app
// wires the Embedder; mcp uses the Client to embed a query for hybrid search.
package embedding
