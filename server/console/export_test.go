package console

import "golang.org/x/crypto/bcrypt"

func init() { dummyCost = bcrypt.MinCost }
