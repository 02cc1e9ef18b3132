// Package httpcase holds the argument, host and method filters' cases.
package httpcase

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
)

func push() error {
	return exec.Command("git", "push", "origin", "main").Run() // want `unprotected call to os/exec.Command`
}

func fetch() error {
	return exec.Command("git", "fetch").Run() // another subcommand: not configured
}

func dynamic(args []string) error {
	return exec.Command("git", args...).Run() // not statically known: not matched
}

func postPay() error {
	_, err := http.Post("https://api.pay.example/v1/charges", "application/json", strings.NewReader("{}")) // want `unprotected call to net/http.Post`
	return err
}

func postElsewhere() error {
	_, err := http.Post("https://api.weather.example/v1", "application/json", nil) // another host
	return err
}

func doPay(ctx context.Context, c *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, "POST", "https://eu.pay.example/v1/charges", nil)
	if err != nil {
		return err
	}
	_, err = c.Do(req) // want `unprotected call to \(\*net/http.Client\).Do`
	return err
}

func getPay(ctx context.Context, c *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.pay.example/v1/charges", nil)
	if err != nil {
		return err
	}
	_, err = c.Do(req) // a GET: not configured
	return err
}

func doUnknown(c *http.Client, req *http.Request) error {
	_, err := c.Do(req) // the request is not known here: not matched
	return err
}
