"""Part 4: the termination-cause detector's time to verdict, healthy and with a hanging API."""
