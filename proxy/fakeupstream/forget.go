package fakeupstream

// Forget drops the requests recorded so far (what Requests and Rejections return), so a
// long benchmark replay does not hold every request body it ever sent. The prompt cache,
// the signed thinking blocks and the OpenAI response store are kept: later requests are
// answered exactly as they would have been.
func (s *Server) Forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = nil
}
