"""People check the judges: the review web app (`evaltrace review`) and judge calibration (`evaltrace calibrate`)."""
