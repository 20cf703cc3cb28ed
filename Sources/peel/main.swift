print("peel")
