module example.com/fixture/sub

go 1.25.0

require example.com/fixture v0.0.0

replace example.com/fixture => ../
