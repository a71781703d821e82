import java.io.BufferedReader;
import java.io.FileReader;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import weka.classifiers.bayes.AODE;
import weka.core.Instance;
import weka.core.Instances;

/**
 * Weka's AODE, prequential, one event at a time inside the JVM.
 *
 * <p>Usage: {@code java AodeLoop events.arff [probabilities.csv]}. The model starts
 * empty ({@code -F 1}, updateable); each instance is scored with
 * distributionForInstance, then learned with updateClassifier. Prints one line:
 * events, CPU nanoseconds of the loop (this thread), wall nanoseconds of the loop,
 * correct predictions. With a second argument, writes each event's distribution
 * (untimed run of its own, after the timed one).
 */
public class AodeLoop {
    static AODE fresh(Instances data) throws Exception {
        AODE model = new AODE();
        model.setOptions(new String[] {"-F", "1"});
        model.buildClassifier(new Instances(data, 0));
        return model;
    }

    public static void main(String[] args) throws Exception {
        Instances data = new Instances(new BufferedReader(new FileReader(args[0])));
        data.setClassIndex(data.numAttributes() - 1);
        AODE model = fresh(data);
        ThreadMXBean bean = ManagementFactory.getThreadMXBean();
        long cpu = bean.getCurrentThreadCpuTime();
        long wall = System.nanoTime();
        int hits = 0;
        for (int i = 0; i < data.numInstances(); i++) {
            Instance inst = data.instance(i);
            double[] p = model.distributionForInstance(inst);
            int best = 0;
            for (int k = 1; k < p.length; k++) {
                if (p[k] > p[best]) {
                    best = k;
                }
            }
            if (best == (int) inst.classValue()) {
                hits++;
            }
            model.updateClassifier(inst);
        }
        cpu = bean.getCurrentThreadCpuTime() - cpu;
        wall = System.nanoTime() - wall;
        System.out.println(data.numInstances() + " " + cpu + " " + wall + " " + hits);
        if (args.length > 1) {
            model = fresh(data);
            try (PrintWriter out = new PrintWriter(args[1])) {
                for (int i = 0; i < data.numInstances(); i++) {
                    Instance inst = data.instance(i);
                    double[] p = model.distributionForInstance(inst);
                    StringBuilder line = new StringBuilder();
                    for (int k = 0; k < p.length; k++) {
                        if (k > 0) {
                            line.append(',');
                        }
                        line.append(Double.toString(p[k]));
                    }
                    out.println(line);
                    model.updateClassifier(inst);
                }
            }
        }
    }
}
