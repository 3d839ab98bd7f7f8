// Package demo is an example: not recorded.
package demo

// Hidden is not recorded.
func Hidden() {}
