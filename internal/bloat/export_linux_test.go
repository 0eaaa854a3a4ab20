package bloat

// ListenPing exposes listenPing to the external tests.
var ListenPing = listenPing
