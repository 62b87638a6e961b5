// Package memlimit bounds the memory of a child process of the node's
// binary (the validate-worker of internal/sandbox, the repack-worker of
// internal/gitsource) from inside it: the Go memory limit, RLIMIT_AS on
// Linux as a backstop, and a watchdog that ends the process once it holds
// more than its limit over what it held at start. A child so ended exits
// with status 3 and says so on stderr; its parent reports the budget.
package memlimit
