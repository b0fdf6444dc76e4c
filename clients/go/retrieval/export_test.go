package retrieval

// RetryWait lets the tests read the waits between attempts without waiting them.
var RetryWait = retryWait

// MaxFileBytes is the largest file DocumentFromFile reads.
const MaxFileBytes = maxMessageBytes
