// Package deep is internal: not recorded.
package deep

// Hidden is not recorded.
func Hidden() {}
