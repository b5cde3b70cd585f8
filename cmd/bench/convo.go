package main

import "github.com/smarter-compact/smarter-compact/proxy/fakeupstream"

// convo builds Claude Code–shaped Anthropic requests for the overhead runs: fakeupstream's
// ClaudeCodeConvo (the conversation of the proxy's request-path benchmarks) with the system
// prompt and tools before the messages.
type convo struct{ *fakeupstream.Convo }

func newConvo(sid string) *convo {
	return &convo{fakeupstream.NewConvo(fakeupstream.ClaudeCodeConvo, sid).SystemFirst()}
}

// add appends one tool step, starting a new user turn every ten steps.
func (c *convo) add() { c.Add() }

// withSession returns an independent copy for session sid.
func (c *convo) withSession(sid string) *convo { return &convo{c.WithSession(sid)} }

// body renders the request.
func (c *convo) body() []byte { return c.Body() }

// size is the request's size in the strict fake's tokens (bytes / 3).
func (c *convo) size() int { return c.Size() / 3 }

// convoOf grows a conversation until its request holds about tokens tokens (bytes / 3).
func convoOf(sid string, tokens int) *convo {
	c := newConvo(sid)
	for c.size() < tokens {
		c.add()
	}
	return c
}
