package policy

// exponents are the ISO 4217 minor-unit exponents of the currencies whose exponent is not 2:
// how many digits of an amount in minor units come after the decimal point. The codes ISO 4217
// lists with no minor unit (the precious metals, the SDR, the bond-market and test units) are
// read as whole units. Every other code the currency tables know has two.
var exponents = map[string]int{
	// 0: no minor unit in use.
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	// 0: no minor unit at all ("N.A." in the standard).
	"XAG": 0, "XAU": 0, "XBA": 0, "XBB": 0, "XBC": 0, "XBD": 0, "XDR": 0, "XPD": 0, "XPT": 0,
	"XSU": 0, "XTS": 0, "XUA": 0, "XXX": 0,
	// 3: fils, baisa, millimes, dirhams.
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	// 4: the Chilean and Uruguayan units of account.
	"CLF": 4, "UYW": 4,
}

// MinorUnits returns the ISO 4217 minor-unit exponent of the currency code (0 for JPY, 2 for
// EUR, 3 for KWD, 4 for CLF), and false for a string that is not a currency code. An amount
// whose currency an argument names is read with it: a policy written for euros cannot know that
// the argument will say yen.
func MinorUnits(code string) (int, bool) {
	if !knownCurrency(code) {
		return 0, false
	}
	if e, ok := exponents[code]; ok {
		return e, true
	}
	return 2, true
}
