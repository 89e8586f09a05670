// Command pause blocks until it receives SIGTERM or SIGINT, then exits 0. test/image -pause puts
// it, built static, on the controller image's base: the smallest process a test can run in a
// container of that base, and one that stops at once when the container is stopped.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of a container a signal without a handler is ignored: the handler is what lets
	// the container stop without waiting for SIGKILL.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
}
