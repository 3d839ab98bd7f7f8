module example.com/fixture

go 1.25.0
