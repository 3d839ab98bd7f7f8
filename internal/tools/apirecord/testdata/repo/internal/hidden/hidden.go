// Package hidden is internal: not recorded.
package hidden

// Hidden is not recorded.
func Hidden() {}
