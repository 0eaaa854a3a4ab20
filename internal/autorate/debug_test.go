package autorate

import "time"

var DebugHook = &debugHook

func init() { _ = time.Second }
