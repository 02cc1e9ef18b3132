package canon

import "testing"

// payment is a typical argument object: five fields, keys out of order.
var payment = []byte(`{"invoice_id":"inv_88","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}`)

func BenchmarkCanonicalize(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(payment); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseCanonical(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseCanonical(payment); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(payment); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseCanonicalSum is the canon share of deciding one call: parse, canonicalize, hash.
func BenchmarkParseCanonicalSum(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, out, err := ParseCanonical(payment)
		if err != nil {
			b.Fatal(err)
		}
		_ = Sum(out)
	}
}

func BenchmarkMarshal(b *testing.B) {
	v, err := Parse(payment)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSum(b *testing.B) {
	out, err := Canonicalize(payment)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Sum(out)
	}
}
