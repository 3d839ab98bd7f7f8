// Package skip is testdata: not recorded.
package skip

// Hidden is not recorded.
func Hidden() {}
