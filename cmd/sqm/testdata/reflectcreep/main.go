// Command reflectcreep is a deliberate mistake for TestNoReflectMethod: a
// text/template Execute, which calls methods by name through reflection,
// so the linker must keep every exported method of every reachable type.
package main

import (
	"os"
	"text/template"
)

func main() {
	template.Must(template.New("x").Parse("{{.}}\n")).Execute(os.Stdout, os.Args)
}
