// Command light is the small program TestSizesCheck holds within a
// budget that testdata/creep (net/http and TLS) exceeds.
package main

func main() {}
