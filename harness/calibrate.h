/* calibrate.h - cumembench calibrate: the cost of every upstream and driver
 * call on the card as found, as a cost file (docs/costs.md). */
#ifndef CMB_CALIBRATE_H
#define CMB_CALIBRATE_H

/* argv[1] is "calibrate". Returns the exit status: 0, 1 (a call failed,
 * the file could not be written) or 2 (bad arguments, no GPU). */
int cmb_calibrate_main(int argc, char **argv);

#endif /* CMB_CALIBRATE_H */
