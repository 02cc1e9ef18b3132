package webhook_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/webhook"
)

// The signatures below are computed here from the providers' documented formats, independently
// of the verifiers.

func hmacHex(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

// stripeHeader is a Stripe-Signature for body signed at t under secret.
func stripeHeader(secret string, t time.Time, body string) string {
	ts := fmt.Sprint(t.Unix())
	return "t=" + ts + ",v1=" + hmacHex(secret, ts+"."+body)
}

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const stripeSecret = "whsec_test_4eC39HqLyjWDarjtT1zdp7dc"

func TestStripe(t *testing.T) {
	t.Parallel()
	v, err := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{stripeSecret, "whsec_next"}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"evt_1","type":"payout.paid","data":{"object":{"id":"po_1","amount":180000}}}`
	good := stripeHeader(stripeSecret, now, body)
	cases := []struct {
		name   string
		header string
		body   string
		want   error
	}{
		{"valid", good, body, nil},
		{"valid under the second secret", stripeHeader("whsec_next", now, body), body, nil},
		{"one of two v1 matches", good + ",v1=" + strings.Repeat("0", 64), body, nil},
		{"v0 and unknown schemes ignored", good + ",v0=abc,x=y", body, nil},
		{"4 minutes old", stripeHeader(stripeSecret, now.Add(-4*time.Minute), body), body, nil},
		{"missing", "", body, webhook.ErrSignatureMissing},
		{"no v1", "t=" + fmt.Sprint(now.Unix()) + ",v0=abcd", body, webhook.ErrSignatureMissing},
		{"no timestamp", "v1=" + hmacHex(stripeSecret, body), body, webhook.ErrSignatureInvalid},
		{"not key=value", "garbage", body, webhook.ErrSignatureInvalid},
		{"v1 not hex", "t=1,v1=zz", body, webhook.ErrSignatureInvalid},
		{"wrong secret", stripeHeader("whsec_other", now, body), body, webhook.ErrSignatureInvalid},
		{"body altered", good, strings.Replace(body, "180000", "980000", 1), webhook.ErrSignatureInvalid},
		{"timestamp altered", strings.Replace(good, fmt.Sprint(now.Unix()), fmt.Sprint(now.Unix()+1), 1), body, webhook.ErrSignatureInvalid},
		{"6 minutes old", stripeHeader(stripeSecret, now.Add(-6*time.Minute), body), body, webhook.ErrTimestampOutsideTolerance},
		{"6 minutes ahead", stripeHeader(stripeSecret, now.Add(6*time.Minute), body), body, webhook.ErrTimestampOutsideTolerance},
		{"no event id", stripeHeader(stripeSecret, now, `{"type":"payout.paid"}`), `{"type":"payout.paid"}`, webhook.ErrEventID},
		{"event id with a control character", stripeHeader(stripeSecret, now, `{"id":"evt\u0000"}`), `{"id":"evt\u0000"}`, webhook.ErrEventID},
		{"not JSON", stripeHeader(stripeSecret, now, `evt_1`), `evt_1`, webhook.ErrBody},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.header != "" {
				h.Set("Stripe-Signature", tc.header)
			}
			ev, err := v.Verify(h, []byte(tc.body), now)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Verify() = %v, want %v", err, tc.want)
				}
				if strings.Contains(err.Error(), stripeSecret) || strings.Contains(err.Error(), hmacHex(stripeSecret, fmt.Sprint(now.Unix())+"."+tc.body)) {
					t.Errorf("refusal %q reveals the secret or the expected signature", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify() = %v, want the event", err)
			}
			if ev.ID != "evt_1" || ev.Type != "payout.paid" || ev.Provider != "stripe" {
				t.Errorf("Verify() = %+v, want evt_1 payout.paid from stripe", ev)
			}
		})
	}
	if _, err := webhook.Stripe(&webhook.StripeConfig{}); err == nil {
		t.Error("Stripe() without a secret = nil error")
	}
	short, _ := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{stripeSecret}, Tolerance: time.Minute})
	h := http.Header{"Stripe-Signature": {stripeHeader(stripeSecret, now.Add(-2*time.Minute), body)}}
	if _, err := short.Verify(h, []byte(body), now); !errors.Is(err, webhook.ErrTimestampOutsideTolerance) {
		t.Errorf("Verify() with a 1m tolerance of a 2m old delivery = %v, want ErrTimestampOutsideTolerance", err)
	}
}

func TestGitHub(t *testing.T) {
	t.Parallel()
	const secret = "It's a Secret to Everybody"
	v, err := webhook.GitHub(&webhook.GitHubConfig{Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"action":"closed","number":42}`
	sha1sig := func() string {
		m := hmac.New(sha1.New, []byte(secret))
		m.Write([]byte(body))
		return "sha1=" + hex.EncodeToString(m.Sum(nil))
	}()
	cases := []struct {
		name                string
		sig, sig1, delivery string
		body                string
		want                error
	}{
		{"valid", "sha256=" + hmacHex(secret, body), "", "72d3162e-cc78-11e3-81ab-4c9367dc0958", body, nil},
		{"missing", "", "", "72d3162e", body, webhook.ErrSignatureMissing},
		{"legacy SHA-1 only", "", sha1sig, "72d3162e", body, webhook.ErrSignatureMissing},
		{"no sha256= prefix", hmacHex(secret, body), "", "72d3162e", body, webhook.ErrSignatureInvalid},
		{"not hex", "sha256=xyz", "", "72d3162e", body, webhook.ErrSignatureInvalid},
		{"wrong secret", "sha256=" + hmacHex("other", body), "", "72d3162e", body, webhook.ErrSignatureInvalid},
		{"body altered", "sha256=" + hmacHex(secret, body), "", "72d3162e", `{"action":"closed","number":43}`, webhook.ErrSignatureInvalid},
		{"no delivery id", "sha256=" + hmacHex(secret, body), "", "", body, webhook.ErrEventID},
		{"delivery id too long", "sha256=" + hmacHex(secret, body), "", strings.Repeat("a", 300), body, webhook.ErrEventID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range map[string]string{"X-Hub-Signature-256": tc.sig, "X-Hub-Signature": tc.sig1, "X-GitHub-Delivery": tc.delivery} {
				if v != "" {
					h.Set(k, v)
				}
			}
			h.Set("X-GitHub-Event", "pull_request")
			ev, err := v.Verify(h, []byte(tc.body), now)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Verify() = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify() = %v, want the event", err)
			}
			if ev.ID != tc.delivery || ev.Type != "pull_request" || ev.Provider != "github" {
				t.Errorf("Verify() = %+v", ev)
			}
		})
	}
}

func TestHMAC(t *testing.T) {
	t.Parallel()
	secret := []byte("shared-secret")
	sign := func(msg string) string {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(msg))
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	// A scheme with a signed id and timestamp, base64 signatures prefixed "v1,".
	v, err := webhook.HMAC(&webhook.HMACConfig{Name: "acme", Secrets: [][]byte{secret}, TimestampHeader: "Webhook-Timestamp",
		Prefix: "v1,", Encoding: "base64", TypeHeader: "Webhook-Type"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"order":"o_7"}`
	ts := fmt.Sprint(now.Unix())
	good := "v1," + sign("msg_1."+ts+"."+body)
	cases := []struct {
		name        string
		id, ts, sig string
		want        error
	}{
		{"valid", "msg_1", ts, good, nil},
		{"valid among several", "msg_1", ts, "v1,AAAA " + good, nil},
		{"missing", "msg_1", ts, "", webhook.ErrSignatureMissing},
		{"no signature with the prefix", "msg_1", ts, "v2," + sign("msg_1."+ts+"."+body), webhook.ErrSignatureMissing},
		{"id swapped", "msg_2", ts, good, webhook.ErrSignatureInvalid},
		{"timestamp swapped", "msg_1", fmt.Sprint(now.Unix() + 1), good, webhook.ErrSignatureInvalid},
		{"no timestamp", "msg_1", "", good, webhook.ErrSignatureInvalid},
		{"stale", "msg_1", fmt.Sprint(now.Add(-time.Hour).Unix()), "v1," + sign("msg_1."+fmt.Sprint(now.Add(-time.Hour).Unix())+"."+body), webhook.ErrTimestampOutsideTolerance},
		{"no id", "", ts, "v1," + sign("."+ts+"."+body), webhook.ErrEventID},
		{"not base64", "msg_1", ts, "v1,!!!", webhook.ErrSignatureInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range map[string]string{"Webhook-Id": tc.id, "Webhook-Timestamp": tc.ts, "Webhook-Signature": tc.sig} {
				if v != "" {
					h.Set(k, v)
				}
			}
			h.Set("Webhook-Type", "order.created")
			ev, err := v.Verify(h, []byte(body), now)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("Verify() = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify() = %v, want the event", err)
			}
			if ev.ID != "msg_1" || ev.Type != "order.created" || ev.Provider != "acme" || !ev.Timestamp.Equal(now) {
				t.Errorf("Verify() = %+v", ev)
			}
		})
	}

	// Defaults: hex over the body, Webhook-Signature and Webhook-Id.
	plain, err := webhook.HMAC(&webhook.HMACConfig{Secrets: [][]byte{secret}, Prefix: "sha256="})
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(body))
	h := http.Header{"Webhook-Signature": {"sha256=" + hex.EncodeToString(m.Sum(nil))}, "Webhook-Id": {"d_1"}}
	if ev, err := plain.Verify(h, []byte(body), now); err != nil || ev.ID != "d_1" || ev.Provider != "hmac" {
		t.Errorf("Verify() = %+v, %v; want d_1 from hmac", ev, err)
	}
	for _, bad := range []*webhook.HMACConfig{nil, {Secrets: [][]byte{{}}}, {Secrets: [][]byte{secret}, Encoding: "base32"}} {
		if _, err := webhook.HMAC(bad); err == nil {
			t.Errorf("HMAC(%+v) = nil error, want a refusal", bad)
		}
	}
}
