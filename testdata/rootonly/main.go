// Command rootonly is a program that imports package latch and no store backend: the layering
// test runs it to see what such a program is told when it opens a Postgres store.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/latchkit/latch"
)

func main() {
	st, err := latch.OpenStore(context.Background(), os.Args[1], nil)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	st.Close()
}
