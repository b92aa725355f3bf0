"""ResidualPlanner / ResidualPlanner+ (He, Xiao, Toksoz, Ding, Zhang, Kifer): the Plan, selection of σ², coefficients."""
