package console

import "golang.org/x/crypto/bcrypt"

func init() { dummyCost = bcrypt.MinCost }

// SetCheckPassword makes the console built from c check passwords with f (which a test wraps
// around CheckPassword to count and time the checks).
func SetCheckPassword(c *Config, f func(hash, password string) error) { c.checkPassword = f }
