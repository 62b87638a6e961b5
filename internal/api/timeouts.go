package api

// MaxHandlerTime is the longest a handler may work before it writes its
// answer: a rollback's longest wait plus its git budget (the other waits,
// experiment writes and forwards, are shorter: TestMaxHandlerTime). The
// HTTP server's WriteTimeout, which runs from the end of the request's
// headers to the end of the answer, must be longer, or the longest
// legitimate answers would be cut.
const MaxHandlerTime = maxRollbackWait + rollbackGitBudget
