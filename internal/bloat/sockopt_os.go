package bloat

import "runtime"

// notCountedNote says what the missing TCP counters cost on an OS without
// Linux's tcpi_bytes_acked and tcpi_notsent_bytes: only the live upload
// figures, since each phase's total is the server's own count.
var notCountedNote = "acknowledged-byte counts (Linux TCP_INFO) not available on " + runtime.GOOS +
	": live upload figures count bytes handed to the socket, up to a socket buffer ahead; each phase's upload total is the server's count of bytes received"
