// Package fixture is the root package of apirecord's test repository.
package fixture

// Version is recorded in api/root.txt.
const Version = "v0.1.0"
