//go:build !linux

package main

// disableTHP does nothing where there is no Linux THP: the tester on a
// laptop has no transparent huge pages to avoid.
func disableTHP() {}
