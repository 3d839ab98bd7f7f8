// Package sub is a package of a second module in the repository.
package sub

import "example.com/fixture/shapes"

// Biggest uses the other module's types.
func Biggest(...shapes.Shape) (shapes.Shape, bool) { return shapes.Shape{}, false }
