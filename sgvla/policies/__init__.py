"""Policies behind one interface: scripted (expert, prompt-grounded) and LeRobot VLAs."""
