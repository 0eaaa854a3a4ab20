package netperf

// Idle reports whether the server holds no run: for the external tests'
// leak checks.
func (s *Server) Idle() bool { return s.idle() }
