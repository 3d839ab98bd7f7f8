// Command tool is a command: not recorded.
package main

func main() {}
